"""Every algorithm's math against numbers worked out by hand (in the comments)."""

import math

import pytest
import torch

import rlinf_robot.algorithms as A
from rlinf_robot.algorithms import grpo, offpolicy, ppo, rlpd, sac, sft
from rlinf_robot.algorithms.buffers import ReplayBuffer
from rlinf_robot.errors import ConfigError

t = torch.tensor


def test_registry_lookup_and_unknown_name():
    assert A.get("ppo") is ppo.ppo_loss
    assert A.get_advantage("gae") is ppo.compute_gae
    assert A.get_advantage("grpo") is grpo.group_relative_advantages
    with pytest.raises(ConfigError, match="known: .*ppo"):
        A.get("nope")


def test_gae_by_hand():
    # gamma=0.9 lam=0.5; episode ends after t=1.
    # t=2: delta = 2 + .9*2*1 - 1.5 = 2.3                  A2 = 2.3
    # t=1: delta = 0 + 0 - 1.0 = -1.0 (done)                 A1 = -1.0
    # t=0: delta = 1 + .9*1.0 - .5 = 1.4                     A0 = 1.4 + .45*(-1.0) = 0.95
    adv, ret = ppo.compute_gae(
        rewards=t([[1.0], [0.0], [2.0]]),
        values=t([[0.5], [1.0], [1.5]]),
        dones=t([[0.0], [1.0], [0.0]]),
        next_value=t([2.0]),
        gamma=0.9,
        lam=0.5,
    )
    torch.testing.assert_close(adv, t([[0.95], [-1.0], [2.3]]))
    torch.testing.assert_close(ret, t([[1.45], [0.0], [3.8]]))


def test_clipped_policy_loss_by_hand():
    # ratios 1.5, 0.5, 1.0; A = 1, 1, -2; eps = .2
    # min(1.5, 1.2)=1.2; min(0.5, 0.8)=0.5; -2  -> mean -0.1 -> loss 0.1; 2 of 3 clipped
    old = torch.zeros(3)
    new = torch.log(t([1.5, 0.5, 1.0]))
    loss, kl, clipfrac = ppo.clipped_policy_loss(new, old, t([1.0, 1.0, -2.0]), clip=0.2)
    assert loss.item() == pytest.approx(0.1, abs=1e-6)
    assert clipfrac.item() == pytest.approx(2 / 3)
    # k3: (0.5 - ln 1.5) + (-0.5 + ln 2) + 0 = 0.287682 -> /3
    assert kl.item() == pytest.approx(0.287682 / 3, abs=1e-5)


def test_value_loss_clipped_by_hand():
    # v=2, v_old=1, R=3, c=.5: unclipped 1, clipped (1.5-3)^2 = 2.25 -> max 2.25 -> /2 = 1.125
    assert ppo.value_loss(t([2.0]), t([3.0]), t([1.0]), 0.5).item() == pytest.approx(1.125)
    # v=0, v_old=1, R=0: unclipped 0, clipped (0.5)^2 -> max .25 -> .125
    assert ppo.value_loss(t([0.0]), t([0.0]), t([1.0]), 0.5).item() == pytest.approx(0.125)
    assert ppo.value_loss(t([2.0]), t([3.0])).item() == pytest.approx(0.5)


def test_ppo_loss_combines_terms_and_kl_early_stop():
    loss, stats = ppo.ppo_loss(
        torch.zeros(2),
        torch.zeros(2),
        t([1.0, -1.0]),
        t([1.0, 1.0]),
        t([2.0, 0.0]),
        t([0.5, 1.5]),
        vf_coef=0.5,
        ent_coef=0.1,
    )
    # pg = -mean(1, -1) = 0; V = .5*mean(1, 1) = .5; H = 1.0 -> 0 + .25 - .1
    assert loss.item() == pytest.approx(0.15)
    assert stats["approx_kl"].item() == 0.0
    assert (
        not ppo.kl_early_stop(0.01, 0.02) and ppo.kl_early_stop(0.03, 0.02) and not ppo.kl_early_stop(9, None)
    )


def test_chunk_log_prob_masks_unexecuted_steps():
    lp = t([[[-1.0, -2.0], [-3.0, -4.0]]])
    assert ppo.chunk_log_prob(lp).item() == -10.0
    assert ppo.chunk_log_prob(lp, t([[1.0, 0.0]])).item() == -3.0


def test_grpo_group_advantages_by_hand():
    adv = grpo.group_relative_advantages(t([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]]), eps=0.0 + 1e-12)
    torch.testing.assert_close(adv, t([[1.0, -1.0, -1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]))
    torch.testing.assert_close(
        grpo.group_relative_advantages(t([[3.0, 1.0]]), normalize_std=False), t([[1.0, -1.0]])
    )
    with pytest.raises(ValueError):
        grpo.group_relative_advantages(t([1.0, 2.0]))


def test_grpo_kl_and_loss_by_hand():
    # p=.5, q=.25: d = ln .5; e^d - d - 1 = .5 + .693147 - 1
    kl = grpo.kl_k3(torch.log(t([0.5])), torch.log(t([0.25])))
    assert kl.item() == pytest.approx(0.193147, abs=1e-5)
    # on-policy ratio 1: loss = -mean(A) + beta * kl; mask drops the 2nd sample
    loss, stats = grpo.grpo_loss(
        torch.log(t([0.5, 0.5])),
        torch.log(t([0.5, 0.5])),
        t([2.0, 100.0]),
        ref_log_prob=torch.log(t([0.25, 0.25])),
        kl_coef=0.1,
        mask=t([1.0, 0.0]),
    )
    assert loss.item() == pytest.approx(-2.0 + 0.1 * 0.193147, abs=1e-5)
    assert stats["kl_ref"].item() == pytest.approx(0.193147, abs=1e-5)


def test_grpo_closed_form_kl_is_the_gaussians_kl_and_what_k3_estimates():
    mean, ref_mean = t([[[0.3, -0.1]]]), t([[[0.0, 0.2]]])
    log_std, ref_log_std = t([[[-2.0, -1.0]]]), t([[[-2.0, -1.5]]])
    kl = grpo.gaussian_kl(mean, log_std, ref_mean, ref_log_std)
    want = torch.distributions.kl_divergence(
        torch.distributions.Normal(mean, log_std.exp()),
        torch.distributions.Normal(ref_mean, ref_log_std.exp()),
    ).flatten(1)
    torch.testing.assert_close(kl, want)
    # held std: (mu - mu_ref)^2 / 2 sigma^2 = .09 / (2 e^-4) = 2.4566
    assert kl[0, 0].item() == pytest.approx(0.09 / (2 * math.exp(-4.0)), rel=1e-5)
    assert grpo.gaussian_kl(mean, log_std, mean, log_std).abs().max().item() == 0.0
    # k3 from actions sampled under pi estimates the same number, one sample at a time
    gen = torch.Generator().manual_seed(0)
    pi, ref = torch.distributions.Normal(0.3, 0.1), torch.distributions.Normal(0.0, 0.1)
    u = 0.3 + 0.1 * torch.randn(200_000, generator=gen)
    k3 = grpo.kl_k3(pi.log_prob(u), ref.log_prob(u))
    assert k3.mean().item() == pytest.approx(4.5, rel=0.05)  # .09 / (2 x .01)
    assert k3.max().item() > 20 * 4.5  # ...with the far tail the closed form does not have
    # a given KL replaces k3's in the loss
    loss, stats = grpo.grpo_loss(
        t([0.0]), t([0.0]), t([1.0]), ref_log_prob=t([-5.0]), kl_coef=0.5, kl=t([2.0])
    )
    assert loss.item() == pytest.approx(-1.0 + 0.5 * 2.0) and stats["kl_ref"].item() == 2.0


def test_sac_target_and_losses_by_hand():
    # y = 1 + .9 * (min(2, 3) - .5 * (-1)) = 1 + .9 * 2.5 = 3.25 ; done -> 1
    y = sac.sac_q_target(t([1.0, 1.0]), t([0.0, 1.0]), t([[2.0, 2.0], [3.0, 3.0]]), t([-1.0, -1.0]), 0.5, 0.9)
    torch.testing.assert_close(y, t([3.25, 1.0]))
    # critics [3, 1] and [2, 1] vs y = [2, 2]: mean sq 1 and .5 -> sum 1.5 -> /2
    assert sac.sac_critic_loss(t([[3.0, 1.0], [2.0, 1.0]]), t([2.0, 2.0])).item() == pytest.approx(0.75)
    # q_pi [[1, 2], [3, 0]]; log pi [-1, 1]; alpha .5
    q_pi, lp = t([[1.0, 2.0], [3.0, 0.0]]), t([-1.0, 1.0])
    assert sac.sac_actor_loss(q_pi, lp, 0.5, "min").item() == pytest.approx(-0.5)  # mean(-.5-1, .5-0)
    assert sac.sac_actor_loss(q_pi, lp, 0.5, "mean").item() == pytest.approx(-1.5)  # mean(-.5-2, .5-1)


def test_temperature_gradient_direction():
    # entropy -E[log pi] = 0 is above the target -2: grad wrt log_alpha = -mean(lp + H*) = 2 > 0
    log_alpha = torch.zeros((), requires_grad=True)
    sac.temperature_loss(log_alpha, t([-1.0, 1.0]), target_entropy=-2.0).backward()
    assert log_alpha.grad.item() == pytest.approx(2.0)


def test_soft_update():
    a, b = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    with torch.no_grad():
        a.weight.fill_(0.0)
        b.weight.fill_(1.0)
    sac.soft_update(a, b, 0.25)
    assert a.weight.item() == pytest.approx(0.25)


def test_bc_losses_by_hand():
    pred, target = t([[[1.0], [5.0]]]), t([[[0.0], [0.0]]])
    assert sft.bc_loss(pred, target).item() == pytest.approx(3.0)
    assert sft.bc_loss(pred, target, mask=t([[1.0, 0.0]])).item() == pytest.approx(1.0)
    assert sft.bc_loss(pred, target, kind="mse").item() == pytest.approx(13.0)
    assert sft.bc_nll_loss(t([-1.0, -3.0])).item() == pytest.approx(2.0)
    logits = torch.log(t([[[0.25, 0.75], [0.5, 0.5]]]))
    assert sft.token_ce_loss(logits, t([[1, -100]])).item() == pytest.approx(-math.log(0.75))


def test_truncated_is_and_staleness():
    w = offpolicy.truncated_importance_weights(
        torch.log(t([0.6, 0.3])), torch.log(t([0.3, 0.6])), rho_max=1.0
    )
    torch.testing.assert_close(w, t([1.0, 0.5]))
    v = t([5, 3, 1])
    assert offpolicy.staleness(v, 5).tolist() == [0, 2, 4]
    assert offpolicy.fresh_mask(v, 5, 2).tolist() == [True, True, False]


def test_decoupled_ppo_by_hand_and_equals_ppo_when_fresh():
    # w = [1, .5]; rho = [1.5, 1]; A = [1, 2]: -(1 * 1.2), -(.5 * 2) -> mean -1.1
    loss, stats = offpolicy.decoupled_ppo_loss(
        torch.log(t([0.9, 0.3])), torch.log(t([0.6, 0.3])), torch.log(t([0.3, 0.6])), t([1.0, 2.0]), clip=0.2
    )
    assert loss.item() == pytest.approx(-1.1, abs=1e-6)
    assert stats["mean_is_weight"].item() == pytest.approx(0.75)
    lp, old, adv = torch.log(t([0.9, 0.2, 0.5])), torch.log(t([0.6, 0.3, 0.5])), t([1.0, -1.0, 2.0])
    a, _ = offpolicy.decoupled_ppo_loss(lp, old, old, adv)
    b, _, _ = ppo.clipped_policy_loss(lp, old, adv, 0.2)
    torch.testing.assert_close(a, b)


def test_vtrace_by_hand_and_on_policy_equals_lambda_one_returns():
    # ratios 2, .5 -> rho = c = [1, .5]; deltas = [1, .5]; vs1 = .5, vs0 = 1 + .5 = 1.5
    # pg adv: t0 = 1 * (1 + 1.5*0 + .5) = 1.5; t1 = .5 * (1 + 0) = .5
    vs, pg = offpolicy.vtrace(
        torch.log(t([[0.25], [0.5]])),
        torch.log(t([[0.5], [0.25]])),
        t([[1.0], [1.0]]),
        t([[0.0], [0.0]]),
        t([0.0]),
        t([[0.0], [0.0]]),
        gamma=1.0,
    )
    torch.testing.assert_close(vs, t([[1.5], [0.5]]))
    torch.testing.assert_close(pg, t([[1.5], [0.5]]))
    g = torch.Generator().manual_seed(0)
    r, v, d = (
        torch.rand(5, 3, generator=g),
        torch.rand(5, 3, generator=g),
        (torch.rand(5, 3, generator=g) > 0.7).float(),
    )
    nv, lp = torch.rand(3, generator=g), torch.rand(5, 3, generator=g)
    vs, _ = offpolicy.vtrace(lp, lp, r, v, nv, d, gamma=0.9)
    _, ret = ppo.compute_gae(r, v, d, nv, gamma=0.9, lam=1.0)
    torch.testing.assert_close(vs, ret)


def test_replay_buffer_ring_and_symmetric_sampling():
    buf = ReplayBuffer(4)
    buf.add(x=t([[0.0], [1.0], [2.0]]))
    buf.add(x=t([[3.0], [4.0]]))  # wraps: slot 0 now holds 4
    assert len(buf) == 4 and sorted(buf._data["x"].flatten().tolist()) == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError):
        buf.add(y=t([[1.0]]))
    demo, online = ReplayBuffer(10), ReplayBuffer(10)
    demo.add(src=torch.zeros(5, 1))
    g = torch.Generator().manual_seed(0)
    assert rlpd.symmetric_sample(demo, online, 8, g)["src"].sum() == 0  # online empty -> all demo
    online.add(src=torch.ones(5, 1))
    batch = rlpd.symmetric_sample(demo, online, 8, g)
    assert batch["src"].sum().item() == 4.0


def test_subset_min():
    q = t([[1.0, 5.0], [2.0, 0.0], [3.0, 4.0]])
    torch.testing.assert_close(rlpd.subset_min(q, 3), t([[1.0, 0.0]]))
    g = torch.Generator().manual_seed(1)
    out = rlpd.subset_min(q, 2, g)
    pairs = [q[[i, j]].min(0).values for i in range(3) for j in range(3) if i < j]
    assert any(torch.equal(out[0], p) for p in pairs)
    with pytest.raises(ValueError):
        rlpd.subset_min(q, 4)
