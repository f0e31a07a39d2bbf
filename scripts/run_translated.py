"""Run a translated PyTorch model once, in a process where TensorFlow cannot be imported.

usage: python scripts/run_translated.py TRANSLATED.py VERIFY.json

VERIFY.json names the model (class, builder function or module-level object), its arguments and
the input specs in the *original* (Keras) layout; inputs are permuted to channels-first when the
translation changed the layout (as fwport records it).
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import json
import re
import sys
from pathlib import Path


class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "keras", "tf_keras"):
            raise ImportError(f"{name} is blocked: the translated model must run without TensorFlow")
        return None


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # fwport itself, when not installed
    sys.meta_path.insert(0, _NoTensorFlow())
    translated, config_path = Path(sys.argv[1]), Path(sys.argv[2])
    config = json.loads(config_path.read_text())
    import torch

    from fwport.core.pipeline import translate_source

    original = config_path.parent / "model.py"
    info = {m.scope: m for m in translate_source(original.read_text(), str(original)).models}
    spec = importlib.util.spec_from_file_location("translated_model", translated)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    obj = getattr(mod, config["model"])
    model = obj(**config.get("args", {})) if callable(obj) and not isinstance(obj, torch.nn.Module) else obj
    model.eval()
    layout = info.get(config["model"]).layout if config["model"] in info else "same"
    inputs = []
    for s in config["inputs"]:
        m = re.fullmatch(r"(\w+)\[([\d, ]+)\](?::(\d+))?", s.replace(" ", ""))
        dtype, dims, high = m.group(1), [int(d) for d in m.group(2).split(",")], m.group(3)
        if dtype.startswith("int"):
            x = torch.randint(0, int(high or 10), dims)
        else:
            x = torch.randn(*dims)
        if layout == "nchw" and x.dim() >= 3:
            x = x.movedim(-1, 1)  # channels-last -> channels-first
        inputs.append(x)
    with torch.no_grad():
        y = model(*inputs)
    shapes = [tuple(t.shape) for t in (y if isinstance(y, (tuple, list)) else [y])]
    print(f"ran {translated} without TensorFlow: {config['model']} "
          f"inputs {[tuple(x.shape) for x in inputs]} -> outputs {shapes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
