"""Chunk timing rules on a synthetic clock: alignment, replacement, late and stale drops."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_robot.bridge.scheduler import Accepted, ChunkScheduler, Dropped
from rlinf_robot.protocol import ActionChunk

MS = 1_000_000
T = 100 * MS  # 10 Hz


def chunk(seq, h=5, obs_seq=1, align=False, first=0, rate=10.0):
    actions = np.arange(h * 7, dtype=np.float32).reshape(h, 7)
    return ActionChunk(
        seq=seq,
        obs_seq=obs_seq,
        control_mode="joint_delta",
        rate_hz=rate,
        actions=actions,
        align=align,
        first_action_time_ns=first,
    )


def run_until(s: ChunkScheduler, t_from: int, t_to: int, step: int = MS) -> list[tuple[int, int, int]]:
    """Tick every ``step`` ns; returns (time, plan seq, step index) of every applied step."""
    out = []
    for t in range(t_from, t_to, step):
        due = s.due(t)
        if due is not None:
            out.append((t, due.plan.seq, due.index))
    return out


def test_unaligned_chunk_runs_each_step_in_its_slot():
    s = ChunkScheduler(max_obs_age_ns=10**9)
    res = s.offer(chunk(1), now_ns=1000 * MS, obs_stamp_ns=990 * MS)
    assert isinstance(res, Accepted) and res.skipped == 0 and not res.pending
    steps = run_until(s, 1000 * MS, 1600 * MS)
    assert [k for _, _, k in steps] == [0, 1, 2, 3, 4]
    assert [t - 1000 * MS for t, _, _ in steps] == [0, T, 2 * T, 3 * T, 4 * T]
    assert not s.active and s.ended and s.ended[0].seq == 1


def test_aligned_chunk_skips_the_steps_that_elapsed_while_the_learner_computed():
    s = ChunkScheduler(max_obs_age_ns=10**9)
    # computed from an observation captured 250 ms ago: slots 0 and 1 are over, slot 2 is current
    res = s.offer(chunk(1, align=True), now_ns=1250 * MS, obs_stamp_ns=1000 * MS)
    assert res.skipped == 2
    steps = run_until(s, 1250 * MS, 1600 * MS)
    assert [k for _, _, k in steps] == [2, 3, 4]
    assert steps[1][0] == 1300 * MS  # step 3 at its own slot, not 100 ms after arrival


def test_new_chunk_replaces_the_rest_of_the_current_one_from_its_aligned_step():
    s = ChunkScheduler(max_obs_age_ns=10**9)
    s.offer(chunk(1, h=10, align=True), now_ns=0, obs_stamp_ns=0)
    first = run_until(s, 0, 320 * MS)
    assert [k for _, _, k in first] == [0, 1, 2, 3]
    # chunk 2 computed from an observation at t=200 ms, arriving at t=320: steps 0 and 1 elapsed
    res = s.offer(chunk(2, h=10, align=True), now_ns=320 * MS, obs_stamp_ns=200 * MS)
    assert res.skipped == 1
    after = run_until(s, 320 * MS, 520 * MS)
    assert [(seq, k) for _, seq, k in after] == [(2, 1), (2, 2), (2, 3)]
    assert after[1][0] == 400 * MS


def test_chunk_with_an_old_seq_is_dropped():
    s = ChunkScheduler(max_obs_age_ns=10**9)
    assert isinstance(s.offer(chunk(5), 0, 0), Accepted)
    for seq in (5, 4):
        d = s.offer(chunk(seq), 10 * MS, 0)
        assert isinstance(d, Dropped) and d.reason == "old_seq"


def test_explicit_first_action_time_in_the_past_is_dropped_never_run_late():
    s = ChunkScheduler(max_obs_age_ns=10**9)
    d = s.offer(chunk(1, first=1000 * MS), now_ns=1000 * MS + T + 1, obs_stamp_ns=1000 * MS)
    assert isinstance(d, Dropped) and d.reason == "late"
    assert s.due(1000 * MS + T + 2) is None
    # within one period it is still current: runs now, from step 0
    ok = s.offer(chunk(2, first=1000 * MS), now_ns=1000 * MS + T // 2, obs_stamp_ns=1000 * MS)
    assert isinstance(ok, Accepted) and ok.skipped == 0


def test_future_first_action_time_waits_and_the_current_chunk_runs_until_then():
    s = ChunkScheduler(max_obs_age_ns=10**9)
    s.offer(chunk(1, h=10), now_ns=0, obs_stamp_ns=0)
    assert run_until(s, 0, 10 * MS)[0][2] == 0
    res = s.offer(chunk(2, first=250 * MS), now_ns=10 * MS, obs_stamp_ns=0)
    assert res.pending
    steps = run_until(s, 10 * MS, 400 * MS)
    assert [(seq, k) for _, seq, k in steps] == [(1, 1), (1, 2), (2, 0), (2, 1)]
    assert steps[2][0] == 250 * MS


def test_aligned_chunk_entirely_elapsed_is_dropped():
    s = ChunkScheduler(max_obs_age_ns=10**9)
    d = s.offer(chunk(1, h=3, align=True), now_ns=300 * MS, obs_stamp_ns=0)
    assert isinstance(d, Dropped) and d.reason == "late"


@pytest.mark.parametrize(("stamp", "reason"), [(None, "unknown_obs"), (0, "stale_obs")])
def test_chunk_from_an_unknown_or_too_old_observation_is_dropped(stamp, reason):
    s = ChunkScheduler(max_obs_age_ns=500 * MS)
    d = s.offer(chunk(1), now_ns=501 * MS, obs_stamp_ns=stamp)
    assert isinstance(d, Dropped) and d.reason == reason


def test_a_late_loop_runs_only_the_newest_due_step_and_counts_the_rest():
    s = ChunkScheduler(max_obs_age_ns=10**9)
    s.offer(chunk(1, h=10), now_ns=0, obs_stamp_ns=0)
    assert s.due(0).index == 0
    due = s.due(350 * MS)  # the loop stalled through slots 1 and 2
    assert due.index == 3 and due.skipped == 2 and s.skipped_steps == 2
    assert s.due(399 * MS) is None and s.due(400 * MS).index == 4


def test_deadline_is_the_next_slot_then_the_end_of_the_plan():
    s = ChunkScheduler(max_obs_age_ns=10**9)
    assert s.next_deadline_ns() is None
    s.offer(chunk(1, h=2), now_ns=0, obs_stamp_ns=0)
    s.due(0)
    assert s.next_deadline_ns() == T
    s.due(T)
    assert s.next_deadline_ns() == 2 * T
    assert s.due(2 * T) is None and not s.active
    assert s.cancel() is None


def test_a_cancelled_chunk_reports_it_was_cut_and_a_finished_one_does_not():
    """A hold (deadman, stop, lease change, home) ends a chunk early: its report says so, so a
    learner never reads a short motion as the whole chunk's."""
    s = ChunkScheduler(max_obs_age_ns=10**9)
    s.offer(chunk(1), now_ns=0, obs_stamp_ns=0)
    run_until(s, 0, 600 * MS)
    [done] = s.ended
    assert "cut" not in done.report
    s.offer(chunk(2, h=10), now_ns=1000 * MS, obs_stamp_ns=1000 * MS)
    s.offer(chunk(3, h=10), now_ns=1000 * MS + 1, obs_stamp_ns=1000 * MS)  # queued behind it
    run_until(s, 1000 * MS, 1300 * MS)
    current, pending = s.current, s.pending
    assert s.cancel() is current and current.report["cut"] == 1
    assert pending is None or pending.report["cut"] == 1
    assert not s.active
