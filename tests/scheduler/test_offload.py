"""Offload / onload of model + optimizer state: storage freed, restored bit-exactly (no Ray needed)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rlinf_robot.scheduler.worker import Worker  # noqa: E402


class Trainer(Worker):
    def __init__(self, device: str = "cpu"):
        super().__init__()
        torch.manual_seed(0)
        net = torch.nn.Sequential(
            torch.nn.Linear(8, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(), torch.nn.Linear(32, 2)
        )
        tied = torch.nn.Linear(32, 2)
        tied.weight = net[3].weight  # one Parameter registered twice (tied weights)
        self.model = torch.nn.ModuleDict({"net": net, "tied": tied}).to(device)
        self.optim = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.register_offload(model=self.model, optim=self.optim)
        self.dev = device

    def step(self, seed: int) -> float:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(16, 8, generator=g).to(self.dev)
        h = self.model["net"][:3](x)
        loss = (self.model["net"][3](h) + self.model["tied"](h)).pow(2).mean()
        self.optim.zero_grad()
        loss.backward()
        self.optim.step()
        return float(loss.detach())


def _state(t: Trainer) -> dict:
    out = {f"m.{k}": v.detach().cpu().clone() for k, v in t.model.state_dict().items()}
    for i, s in enumerate(t.optim.state.values()):
        out.update({f"o{i}.{k}": v.detach().cpu().clone() for k, v in s.items() if torch.is_tensor(v)})
    return out


def _equal_bits(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)


def _roundtrip(device: str) -> None:
    a, twin = Trainer(device), Trainer(device)
    for s in range(3):
        a.step(s)
        twin.step(s)
    before = _state(a)
    tensors = [
        *a.model.parameters(),
        *a.model.buffers(),  # parameters() lists a tied weight once
        *(v for st in a.optim.state.values() for v in st.values() if torch.is_tensor(v)),
    ]
    expected = sum(v.numel() * v.element_size() for v in tensors)
    report = a.offload()
    assert report["bytes"] == expected and report["seconds"] >= 0 and a.is_offloaded
    assert all(p.numel() == 0 for p in a.model.parameters())
    assert all(b.numel() == 0 for b in a.model.buffers())
    assert all(v.numel() == 0 for s in a.optim.state.values() for v in s.values() if torch.is_tensor(v))
    with pytest.raises(RuntimeError):
        a.step(99)  # offloaded weights cannot silently be used
    assert a.offload() == {"bytes": 0, "seconds": 0.0}  # idempotent
    back = a.onload()
    assert back["bytes"] == expected and not a.is_offloaded
    assert _equal_bits(_state(a), before)
    # Training continues exactly as if nothing happened.
    assert a.step(7) == twin.step(7)
    assert _equal_bits(_state(a), _state(twin))


def test_offload_onload_is_bit_exact_on_cpu():
    _roundtrip("cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_offload_frees_gpu_memory():
    t = Trainer("cuda")
    t.step(0)
    torch.cuda.synchronize()
    used = torch.cuda.memory_allocated()
    t.offload()
    assert torch.cuda.memory_allocated() < used
    t.onload()
    _roundtrip("cuda")


def test_offload_rejects_unknown_targets():
    w = Trainer()
    w.register_offload(bogus=object())
    with pytest.raises(TypeError, match="expected an nn.Module"):
        w.offload()
