"""How much `fwport verify` costs next to its floor: importing both frameworks and running the two
forward passes by hand (the two processes in parallel, as verify runs them).

    python bench/bench_verify.py [--repeat 3]

Reports verify's wall time split into framework start-up (import + build, both sides in parallel),
weight transfer and compute, and the floor. The target is verify <= 1.3 x floor.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    return keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(16, 3, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Conv2D(32, 3, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Flatten(),
        layers.Dense(10),
    ])
'''

FLOOR_KERAS = '''
import os, sys, numpy as np
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
sys.path.insert(0, sys.argv[1])
import keras, model
m = model.build_model()
m(np.zeros((2, 28, 28, 1), "float32"), training=False)
'''
FLOOR_TORCH = '''
import sys, torch
sys.path.insert(0, sys.argv[1])
import translated
m = translated.build_model().eval()
with torch.no_grad():
    m(torch.zeros(2, 1, 28, 28))
'''


def floor(d: str) -> float:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow", TF_ENABLE_ONEDNN_OPTS="0",
               CUDA_VISIBLE_DEVICES="-1")
    t = time.perf_counter()
    a = subprocess.Popen([sys.executable, "-c", FLOOR_KERAS, d], env=env, stderr=subprocess.DEVNULL)
    b = subprocess.Popen([sys.executable, "-c", FLOOR_TORCH, d], env=env, stderr=subprocess.DEVNULL)
    a.wait(), b.wait()
    return time.perf_counter() - t


def main() -> None:
    from fwport.core.pipeline import translate_source
    from fwport.verify import Options, verify

    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check", default="forward,grad")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        Path(d, "model.py").write_text(SOURCE)
        Path(d, "translated.py").write_text(translate_source(SOURCE, "model.py").output)
        floors, totals, parts = [], [], []
        for _ in range(a.repeat):
            floors.append(floor(d))
            t = time.perf_counter()
            cert = verify(Options(str(Path(d, "model.py")), str(Path(d, "translated.py")), "build_model",
                                  checks=tuple(a.check.split(",")), device="cpu"))
            totals.append(time.perf_counter() - t)
            assert cert["verdict"] == "pass", cert.get("problems")
            parts.append(cert["timing"])
    med = statistics.median
    f, v = med(floors), med(totals)
    startup = med(p["torch_build"] for p in parts)  # both sides start together; Keras also computes in this span
    print(f"small CNN (28x28x1, 2 convs, dense), {a.repeat} runs, medians, checks {a.check}, CPU")
    print(f"  floor: import both + build + one forward each, in parallel  {f:6.2f} s")
    print(f"  verify total                                                 {v:6.2f} s  ({v / f:.2f}x floor)")
    print(f"    translate (parent)                                         {med(p['translate'] for p in parts):6.2f} s")
    print(f"    start-up: imports + build (+ Keras compute), both sides    {startup:6.2f} s")
    print(f"    weight transfer                                            {med(p['transfer'] for p in parts):6.2f} s")
    print(f"    torch compute (forward, grads, per-layer)                  {med(p['torch_run'] for p in parts):6.2f} s")
    print(f"    compare                                                    {med(p['compare'] for p in parts):6.2f} s")


if __name__ == "__main__":
    main()
