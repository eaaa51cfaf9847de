"""Action chunks/s: tiny_vla's parallel (OpenVLA-OFT style) decoding vs OpenVLA's autoregressive
action tokens, same size, same inputs, same run.

- ours: ``tiny_vla`` (hidden 128, 2 layers): one bidirectional pass over [patches of both cameras,
  instruction, proprio, H action queries, value] gives the whole H x A chunk at once.
- peer: ``hf_vla`` with ``head="tokens"`` on a tiny random PaliGemma (the real SigLIP + Gemma
  classes) of the same width and depth: OpenVLA's decoding - a prefix pass over [image tokens of
  both cameras, instruction], then one action token (one of 256 bins) per action dim per chunk
  step, H x A one-token passes with a KV cache. Its prompt is the bare instruction, so both read the
  same text and the only difference left is how the chunk is decoded (and the backbone classes).
- also printed, not in the RESULT: ``hf_vla`` ``head="continuous"`` (OFT's parallel decoding on that
  same PaliGemma), which separates "parallel vs autoregressive" from "our model vs PaliGemma".

All through ``predict_action_batch`` (tokenizer, tensors, model, sampling, env-unit actions) at
batch 1, 96x96 front + wrist images, chunk H=4 of A=6 (ee_delta); one torch thread, the process
pinned to one core. Rounds interleave the models (order alternating), the same number of calls
each; the figures are medians over rounds. Then the same at batch 16 (printed only).

Last line: RESULT tiny_vla_inference ours=<chunks/s> peer=<chunks/s> ratio=<ours/peer> goal=>=1
(the goal: parallel decoding is faster than token-by-token decoding at the same model size).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CAMERAS = ("front", "wrist")
INSTRUCTION = "move the gripper to the red ball"
N_BINS = 256  # OpenVLA's action bins per dimension


def make_obs(batch: int, state_dim: int) -> dict:
    rng = np.random.default_rng(0)
    return {
        "state": rng.normal(size=(batch, state_dim)).astype(np.float32),
        "images": {c: rng.integers(0, 256, (batch, 96, 96, 3), dtype=np.uint8) for c in CAMERAS},
        "instruction": [INSTRUCTION] * batch,
    }


def chunks_per_s(policy, obs: dict, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        policy.predict_action_batch(obs)
    return calls * len(obs["state"]) / (time.perf_counter() - t0)


def race(models: dict, obs: dict, calls: int, rounds: int) -> dict[str, list[float]]:
    """chunks/s per model and round; each round runs every model once, the order alternating."""
    for pol in models.values():  # warm up (allocator, caches, prompt tokens)
        chunks_per_s(pol, obs, 3)
    rates: dict[str, list[float]] = {k: [] for k in models}
    names = list(models)
    for r in range(rounds):
        for k in names if r % 2 == 0 else names[::-1]:
            rates[k].append(chunks_per_s(models[k], obs, calls))
    return rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=100, help="predict_action_batch calls per model and round")
    ap.add_argument("--big-batch", type=int, default=16)
    args = ap.parse_args()

    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import torch

    torch.set_num_threads(1)
    import policies
    from rlinf_robot.envs.spec import ActionSpec, ObsSpec

    spec = ActionSpec("ee_delta", (6,), np.full(6, -0.02, np.float32), np.full(6, 0.02, np.float32), 20.0)
    obs_spec = ObsSpec((28,), {c: (96, 96, 3) for c in CAMERAS})
    torch.manual_seed(0)
    ours = policies.make("tiny_vla", action_spec=spec, obs_spec=obs_spec).eval()
    cfg = ours.model.config
    same_size = {"hidden": cfg.hidden_size, "layers": cfg.num_layers, "image_size": cfg.image_size}
    peer_kw = dict(
        action_spec=spec,
        obs_spec=obs_spec,
        cameras=list(CAMERAS),
        chunk_size=ours.chunk_size,
        n_bins=N_BINS,
        prompt="{instruction}",
        tiny_backbone=same_size,
    )
    torch.manual_seed(0)
    peer = policies.make("hf_vla", head="tokens", **peer_kw).eval()
    torch.manual_seed(0)
    oft = policies.make("hf_vla", head="continuous", **peer_kw).eval()
    models = {"tiny_vla": ours, "hf_vla tokens": peer, "hf_vla continuous": oft}

    obs = make_obs(1, obs_spec.state_shape[0])
    shapes = {k: m.predict_action_batch(obs).actions.shape for k, m in models.items()}
    assert len(set(shapes.values())) == 1, f"the models decode different chunks: {shapes}"
    H, A = ours.chunk_size, ours.action_dim
    text = peer.backbone.config.get_text_config()

    def params(m) -> str:
        return f"{sum(p.numel() for p in m.parameters()) / 1e6:.2f} M"

    print(
        f"chunk {H}x{A}, 2 cameras 96x96, batch 1, {args.calls} calls x {args.rounds} rounds, 1 thread\n"
        f"  tiny_vla           {params(ours)} parameters, hidden {cfg.hidden_size}, {cfg.num_layers} layers: "
        f"1 pass per chunk\n"
        f"  hf_vla tokens      {params(peer)} parameters (vision {params(peer.backbone.model.vision_tower)}, "
        f"LM {params(peer.backbone.model.language_model)}), hidden {text.hidden_size}, "
        f"{text.num_hidden_layers} layers: 1 prefix pass + {H * A} one-token passes per chunk\n"
        f"  hf_vla continuous  {params(oft)} parameters, the same PaliGemma: 1 pass per chunk"
    )
    rates = race(models, obs, args.calls, args.rounds)
    med = {k: statistics.median(v) for k, v in rates.items()}
    for k, v in rates.items():
        print(f"  {k:<18} {med[k]:7.1f} chunks/s (rounds {', '.join(f'{x:.1f}' for x in v)})")
    per_round = [o / p for o, p in zip(rates["tiny_vla"], rates["hf_vla tokens"], strict=True)]
    print(
        f"  parallel / autoregressive: tiny_vla {med['tiny_vla'] / med['hf_vla tokens']:.1f}x, "
        f"on the same PaliGemma {med['hf_vla continuous'] / med['hf_vla tokens']:.1f}x "
        f"(per round tiny_vla: {', '.join(f'{x:.1f}' for x in per_round)})"
    )

    if args.big_batch > 1:
        big = make_obs(args.big_batch, obs_spec.state_shape[0])
        calls = max(3, args.calls // args.big_batch)
        rates_b = race(models, big, calls, args.rounds)
        med_b = {k: statistics.median(v) for k, v in rates_b.items()}
        print(
            f"batch {args.big_batch} ({calls} calls x {args.rounds} rounds): "
            + ", ".join(f"{k} {v:.1f}" for k, v in med_b.items())
            + f" chunks/s; tiny_vla / tokens {med_b['tiny_vla'] / med_b['hf_vla tokens']:.1f}x"
        )

    o, p = med["tiny_vla"], med["hf_vla tokens"]
    print(f"RESULT tiny_vla_inference ours={o:.1f}chunks/s peer={p:.1f}chunks/s ratio={o / p:.2f} goal=>=1")


if __name__ == "__main__":
    main()
