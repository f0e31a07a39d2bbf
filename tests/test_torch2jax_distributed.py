"""Single-host data-parallel PyTorch scripts (init_process_group → DDP → DistributedSampler → loop →
destroy_process_group, mp.spawn) translated as one JAX process that drives every local device
(fwport/packs/torch2jax/distributed.py and the distributed-*.toml / multiprocessing-spawn.toml rules): each
change a `single-process` warning, never silent. The translated training function trains like the PyTorch
script run as one process (world_size 1, gloo, CPU): the same parameters and losses after a few steps on the same
data, compared by the verifier; what needs several processes (barrier, all_gather, a sampler read elsewhere)
keeps its error."""
from __future__ import annotations

import json
import socket
import sys

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SOURCE = '''
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def train(model, x, y):
    # one process per device in PyTorch
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:PORT", rank=0, world_size=1)
    rank = dist.get_rank()
    world_size = dist.get_world_size()

    model = DDP(model)
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for epoch in range(4):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            dist.all_reduce(loss, op=dist.ReduceOp.SUM)
            losses.append(loss.item() / world_size)
    dist.destroy_process_group()
    return model.module, losses
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _translate(src: str):
    r = translate_source(src, "ddp.py", "torch2jax")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    return r, errors


def test_the_ddp_script_becomes_one_process_with_a_warning_per_change():
    r, errors = _translate(SOURCE)
    assert not errors, errors
    for gone in ("init_process_group", "destroy_process_group", "DDP", "DistributedSampler", "set_epoch",
                 "all_reduce", "torch", "sampler"):
        assert gone not in r.output, (gone, r.output)
    assert "return model, losses" in r.output  # the wrapper's .module is the model
    assert "rank = jax.process_index()" in r.output and "world_size = jax.process_count()" in r.output
    assert "loader = NumpyLoader(dataset, batch_size=4, shuffle=False)" in r.output, r.output
    assert "# one process per device in PyTorch\n    rank = " in r.output  # the comment above a removed line stays
    warned = [f for f in r.findings if f.code == "single-process"]
    assert all(f.severity is Severity.WARNING for f in warned)
    # init, get_rank, get_world_size, DDP, the sampler, set_epoch, the loader's sampler=, all_reduce, destroy
    assert len(warned) == 9, [f.message for f in warned]
    assert all("jax.sharding" in f.message or "sampler" in f.message or "destroy" in f.message for f in warned)
    assert translate_source(r.output, "ddp.py", "torch2jax").output == r.output


def test_the_translation_trains_like_pytorch_in_one_process(session, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    from fwport.verify.run import Options
    from fwport.verify.torch2jax import verify_training
    src = SOURCE.replace("PORT", str(_free_port()))
    r, errors = _translate(src)
    assert not errors, errors
    (tmp_path / "model.py").write_text(src)
    (tmp_path / "translated.py").write_text(r.output)
    opts = Options(str(tmp_path / "model.py"), str(tmp_path / "translated.py"), "Net", args={},
                   inputs=["float32[12,6]", "int64[12]:3"], device="cpu", direction="torch2jax", dtype="float32")
    cert = verify_training(opts, session, "train", {})
    assert cert["verdict"] == "pass", json.dumps(cert, indent=1, default=str)[:3000]
    assert len(cert["results"]["trained"]) == 4 and cert["results"]["losses"][0]["ok"]

    # and the translation itself trains: its loss falls over the 12 steps
    import jax
    import numpy as np
    sys.path.insert(0, str(tmp_path))
    try:
        import translated
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("translated", None)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 6)).astype("float32")
    y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0).astype("int32")
    _, losses = translated.train(translated.Net(key=jax.random.key(0)), x, y)
    assert len(losses) == 12 and np.mean(losses[-3:]) < 0.7 * np.mean(losses[:3]), losses


TUTORIAL = '''
import torch
import torch.nn.functional as F
import torch.multiprocessing as mp
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group


def ddp_setup(rank, world_size):
    torch.cuda.set_device(rank)
    torch.accelerator.set_device_index(rank)
    init_process_group(backend="nccl", rank=rank, world_size=world_size)


def prepare_dataloader(dataset, batch_size):
    return DataLoader(dataset, batch_size=batch_size, pin_memory=True, shuffle=False,
                      sampler=DistributedSampler(dataset))


def main(rank, world_size, total_epochs, batch_size):
    ddp_setup(rank, world_size)
    train_data = prepare_dataloader(make_dataset(), batch_size)
    model = DDP(make_model(), device_ids=[rank])
    for epoch in range(total_epochs):
        train_data.sampler.set_epoch(epoch)
        run_epoch(model, train_data)
    destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(main, args=(world_size, 10, 32), nprocs=world_size)
'''


def test_the_spawned_tutorial_runs_main_once_and_shuffles_in_the_loader():
    r, errors = _translate(TUTORIAL)
    assert not errors, errors
    out = r.output[r.output.index("def ddp_setup"):]  # (the NumpyLoader helper above it names shuffle=False)
    assert "def ddp_setup(rank, world_size):\n    pass\n" in out, out
    assert "return NumpyLoader(dataset, batch_size=batch_size, shuffle=True)" in out, out
    assert "sampler" not in out and "shuffle=False" not in out, out
    assert "    model = make_model()\n    for epoch in range(total_epochs):\n        run_epoch(model, train_data)\n\n" in out
    assert "main(0, world_size, 10, 32)" in out
    shuffled = [f for f in r.findings if f.code == "single-process" and "shuffle=True" in f.message]
    assert shuffled and "not the same order" in shuffled[0].message
    compile(r.output, "tutorial.py", "exec")


@pytest.mark.parametrize("src,left", [
    # a barrier orders the processes around file I/O: its meaning is several processes'
    ("import torch.distributed as dist\n\nif rank == 0:\n    download()\ndist.barrier()\n", "barrier"),
    # all_gather fills a list with every process's tensor
    ("import torch.distributed as dist\n\nouts = [None] * 4\ndist.all_gather(outs, t)\n", "all_gather"),
    # an asynchronous all_reduce returns a work handle that is waited on
    ("import torch.distributed as dist\n\nwork = dist.all_reduce(t, async_op=True)\nwork.wait()\n", "all_reduce"),
    # a sampler read elsewhere (its length), or with a literal replica count: a data split over processes
    ("from torch.utils.data import DataLoader\nfrom torch.utils.data.distributed import DistributedSampler\n\n"
     "s = DistributedSampler(ds)\nloader = DataLoader(ds, batch_size=2, sampler=s)\nn = len(s)\n", "DistributedSampler"),
    ("from torch.utils.data import DataLoader\nfrom torch.utils.data.distributed import DistributedSampler\n\n"
     "loader = DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, num_replicas=2, rank=1))\n",
     "DistributedSampler"),
    # a literal number of processes the script needs
    ("import torch.distributed as dist\n\ndist.init_process_group('gloo', rank=rank, world_size=2)\n",
     "init_process_group"),
    # RPC: the spawned processes take roles by rank (a master, workers): not run once, nothing removed
    ("import torch.multiprocessing as mp\nimport torch.distributed as dist\nfrom torch.distributed import rpc\n\n"
     "def run_worker(rank, world_size):\n    dist.init_process_group('gloo', rank=rank, world_size=world_size)\n"
     "    if rank == 0:\n        rpc.init_rpc('master', rank=rank, world_size=world_size)\n\n"
     "mp.spawn(run_worker, args=(2,), nprocs=2)\n", "spawn(run_worker"),
])
def test_what_needs_several_processes_keeps_its_error(src, left):
    r, errors = _translate(src)
    assert errors and any(left in f.message for f in errors), r.findings
    assert left in r.output


@pytest.mark.parametrize("src,says", [
    ("from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n\nmodel = FSDP(model)\n", "NamedSharding"),
    ("from torch.distributed import rpc\n\nrpc.init_rpc('worker', rank=0, world_size=2)\n", "RPC between processes"),
    ("from torch.distributed.tensor.parallel import parallelize_module\n\nparallelize_module(m, mesh, plan)\n",
     "PartitionSpec"),
])
def test_fsdp_rpc_and_tensor_parallelism_are_refused_with_what_to_write(src, says):
    r, errors = _translate(src)
    assert len(errors) == 1 and errors[0].code == "no-rule" and says in errors[0].message, r.findings
