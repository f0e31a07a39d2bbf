"""Run ``fwport verify`` on the real-world dev set (issues 8 and 10): each file is translated, then the
original and its translation are compared numerically, one row per dev file.

    CORPUS_CACHE=/tmp/rwcache python bench/realworld_verify.py [--direction torch2jax|tf2torch]
        [--cache DIR] [--ids a,b] [--out DIR] [--json FILE] [--timeout S]

The dev set's file list is /work/shared/realworld/specs_<torch|tf>.py (``--specs`` to point elsewhere);
only its ``id``, ``local`` and ``runtime`` (the Keras major) are read here. How each model is built and fed to ``fwport verify``
(``--model``, ``--args``, ``--input``, ``--dtype``...) is the table below, written from the spec's
``build`` / ``inputs``. A row whose forward call verify cannot express (extra state arguments, a model
built by the script's own data code) says why and is counted as not passing.

Per row: error findings of the translation, the verdict (PASS / MISMATCH / ERROR / SKIP) and the first
line of the reason; finally ``verify: N/M pass``. Not a test: CI has no dev set.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# id -> how verify builds and feeds the model. model: a name in the file or a call expression whose
# names resolve in each file; args: keyword arguments (JSON); inputs: --input specs (the original's
# layout); opts: further verify options; skip: why verify cannot run this one as the spec does.
TORCH = {
    "pt_pe_mnist": dict(model="Net", inputs=["float32[4,1,28,28]"]),
    "pt_yj_ffnn": dict(model="NeuralNet(input_size, hidden_size, num_classes)", inputs=["float32[4,784]"]),
    "pt_pe_super_res": dict(model="Net", args={"upscale_factor": 3}, inputs=["float32[2,1,32,32]"]),
    "pt_kl_resnet": dict(model="ResNet18", inputs=["float32[2,3,32,32]"]),
    "pt_kl_mobilenetv2": dict(model="MobileNetV2", inputs=["float32[2,3,32,32]"]),
    "pt_yj_resnet": dict(model="ResNet(ResidualBlock, [2, 2, 2])", inputs=["float32[4,3,32,32]"]),
    # sequence-first (L, N): tokens and the hidden state (nlayers, N, nhid) hold the batch axis second (the probe finds
    # it; the log-probs come out (L * N, V), the examples merged into axis 0). GRU: one state array (LSTM's is a
    # pair, which --input cannot give); a random hidden state rather than init_hidden's zeros (a stronger check);
    # tie_weights=True: the decoder uses the encoder's table (tying.py: a tie under a flag of __init__), its
    # gradient the sum of both uses; the variant checks the untied model of the same translation. The file's
    # TransformerModel(nn.Transformer) translates too (its variant below), so the whole file verifies
    "pt_pe_wlm_rnn": dict(model="RNNModel('GRU', 100, 16, 16, 2, 0.2, tie_weights=True)",
                          inputs=["int64[6,4]:100", "float32[2,4,16]"],
                          variants={"tie_weights=False": dict(model="RNNModel('GRU', 100, 16, 16, 2, 0.2)"),
                                    # the file's sequence-first TransformerModel: tokens (L, N), its PositionalEncoding's
                                    # buffer (max_len, 1, E) read for one example as pe[:L, 0] (batch.buffer_read)
                                    "TransformerModel": dict(model="TransformerModel(100, 16, 4, 16, 2, 0.2)",
                                                             inputs=["int64[6,4]:100"])}),
    "pt_gk_seq2seq_attn": dict(skip="its forward is written for a batch of one, which per-example code cannot express: "
                                    "torch.empty([n_step, 1, n_class]) fixes the batch to 1, get_att_score's "
                                    "torch.dot(dec_output.view(-1), score.view(-1)) sums over the batch, and forward "
                                    "collects .numpy() of each step's weights (translation errors name each line); "
                                    "the model and its inputs are also built by the script's __main__ block"),
    "pt_pe_time_seq": dict(model="Sequence", inputs=["float64[3,100]"], opts=["--dtype", "float64"]),
    # variants: the same translation verified again with other arguments, extra rows outside the N/M count
    "pt_nanogpt": dict(model="GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, "
                             "dropout=0.0, bias=True))", inputs=["int64[2,16]:64"],
                       variants={"bias=False": dict(model="GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=2, "
                                                          "n_head=2, n_embd=32, dropout=0.0, bias=False))")}),
    "pt_vit": dict(model="ViT", args=dict(image_size=32, patch_size=4, num_classes=10, dim=64, depth=2, heads=4,
                                          mlp_dim=128), inputs=["float32[2,3,32,32]"]),
    # (HW, N, C) inside: the encoder/decoder layers' nn.MultiheadAttention are sequence-first; the query embedding
    # (Q, C) is shared by the batch (--batch-axis none for it)
    "pt_detr_transformer": dict(model="Transformer(d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2, "
                                      "dim_feedforward=64, dropout=0.0, return_intermediate_dec=True)",
                                inputs=["float32[2,32,4,4]", "bool[2,4,4]", "float32[10,32]", "float32[2,32,4,4]"],
                                opts=["--batch-axis", "0,0,none,0"],
                                # the layers' forward_pre with the encoder's LayerNorm; the decoder's unsqueeze(0)
                                variants={"normalize_before=True": dict(
                                    model="Transformer(d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2, "
                                          "dim_feedforward=64, dropout=0.0, normalize_before=True, "
                                          "return_intermediate_dec=False)")}),
    # its forward draws noise in eval mode too: verify compares it with constant draws on both sides
    "pt_pe_vae": dict(model="VAE", inputs=["float32[4,1,28,28]"]),
    # the classes read the module-level argparse namespace `opt`: --load defs runs the argparse setup (defaults)
    "pt_gan_wgan_gp": dict(model="Generator", inputs=["float32[4,100]"], opts=["--load", "defs"]),
    # a whole graph (features (N, F), adjacency (N, N)): the probe finds no batch axis; a dense adjacency
    # stands in for the spec's sparse one (torch.spmm and the translation's `@` take both)
    "pt_pe_gcn": dict(model="GCN(16, 32, 4)", inputs=["float32[10,16]", "float32[10,10]"]),
}
TF = {
    "tf_dr_custommodel": dict(model="MyModel", inputs=["float32[4,28,28]"]),
    "tf_docs_quickstart_adv": dict(model="MyModel()", inputs=["float32[4,28,28,1]"]),
    # models built by top-level statements among data code: --load defs runs the statements that build them
    "tf_kio_antirectifier": dict(model="model", inputs=["float32[4,784]"], opts=["--load", "defs"]),
    "tf_yy_resnet": dict(model="ResNet18", inputs=["float32[2,32,32,3]"]),
    "tf_tfe_densenet": dict(model="DenseNet", args=dict(mode="from_depth", growth_rate=12, output_classes=10,
                                                         depth_of_model=40, num_of_blocks=3,
                                                         num_layers_in_each_block=-1, data_format="channels_last",
                                                         bottleneck=False, compression=1.0, weight_decay=1e-4,
                                                         dropout_rate=0.0, pool_initial=False, include_top=True),
                            inputs=["float32[2,32,32,3]"]),
    # float32 rounding through 30 BatchNorm'd convolutions differs by 8e-4 relative; float64 by 4e-13
    "tf_kio_oxford_unet": dict(model="get_model((160, 160), 3)", inputs=["float32[1,160,160,3]"],
                               opts=["--dtype", "float64"]),
    # call(inputs) takes (sequences, lengths) as one list, as Keras passes two inputs to a one-input call
    "tf_dr_colorbot": dict(model="RNNColorbot([64, 32], 3, 0.5)", inputs=["float32[2,10,256]", "int32[2]:1..10"]),
    # the decoder (embedding, GRU, a nested Bahdanau attention block) on a token, a hidden state, the encoder's outputs
    "tf_tfe_nmt": dict(model="Decoder", args=dict(vocab_size=120, embedding_dim=16, dec_units=32),
                       inputs=["int32[2,1]:120", "float32[2,32]", "float32[2,7,32]"]),
    "tf_kio_bilstm": dict(model="model", inputs=["int32[2,200]:20000"], opts=["--load", "defs"]),
    "tf_kio_txtcls_transformer": dict(model="model", inputs=["int32[2,200]:20000"], opts=["--load", "defs"]),
    # build_model reads the global n_classes, computed from the data: --define sets it; its encoder blocks and
    # its MLP are built by loops over run-time counts (weights mapped by the order Keras calls the layers). Its
    # LayerNormalizations normalize one feature (inputs.shape[-1] is 1): the gradients of what feeds them are zero
    # in exact arithmetic, float32 rounding noise in both frameworks (up to 1e-2 of the largest, as at 20 steps);
    # float64 agrees to 1e-10
    "tf_kio_ts_transformer": dict(model="build_model((500, 1), head_size=32, num_heads=2, ff_dim=4, "
                                        "num_transformer_blocks=2, mlp_units=[32], mlp_dropout=0.4, dropout=0.25)",
                                  inputs=["float32[2,500,1]"],
                                  opts=["--load", "defs", "--define", "n_classes=2", "--dtype", "float64"]),
    # the file's configuration (12 blocks of 768, read from a module-level namespace `args`) with a vocabulary
    # of 100 tokens + 16 positions instead of 40,478 + 512 (the embedding alone was 31M parameters): 85M
    # parameters, one minute
    "tf_dr_gpt": dict(model="TransformerModel(cfg=args, vocab=116, n_ctx=16)", inputs=["int32[2,16,2]:116"]),
    # add_variable(name="kernel%d" % i) in a loop: moved by name (the translation registers the same names)
    "tf_dr_matmul": dict(model="MyLayer([28 * 28, 200, 200, 10])", inputs=["float32[4,784]"]),
    "tf_kio_wgan_gp": dict(model="get_discriminator_model()", inputs=["float32[4,28,28,1]"]),
    # the encoder's third output samples keras.backend.random_normal: verify finds the forward stochastic and
    # compares it with constant draws on both sides (the decoder passes too: --model decoder --input float32[4,2])
    "tf_kio_vae": dict(model="encoder", inputs=["float32[4,28,28,1]"], opts=["--load", "defs"]),
    # the encoder block on a sequence and its padding mask; the notebook's other cells carry the errors
    "tf_dlwp3_transformer": dict(model="TransformerEncoder", args=dict(hidden_dim=32, intermediate_dim=64, num_heads=2),
                                 inputs=["float32[2,10,32]", "bool[2,10]"], opts=["--load", "defs"]),
}
TABLES = {"torch2jax": TORCH, "tf2torch": TF}
SPECS = {"torch2jax": "specs_torch.py", "tf2torch": "specs_tf.py"}


def load_specs(path: Path) -> list[dict]:
    spec = importlib.util.spec_from_file_location("rw_specs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return list(mod.SPECS)


def translate(src: Path, dest: Path, direction: str) -> int:
    """Translate ``src`` into ``dest``; returns the number of error findings."""
    from fwport.core.finding import Severity
    from fwport.core.pipeline import translate_source
    r = translate_source(src.read_text(encoding="utf-8"), str(src), direction)
    dest.write_text(r.output, encoding="utf-8")
    return sum(1 for f in r.findings if f.severity == Severity.ERROR)


def first_reason(text: str, verdict: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if verdict == "PASS":
        return ""
    for ln in lines:
        if ln.startswith("fwport verify: error:"):
            return ln[len("fwport verify: error:"):].strip()
    keys = ("FAIL", "mismatch", "MISMATCH", "problem", "no PyTorch", "no such", "differ")
    for ln in lines:
        if any(k in ln for k in keys) and not ln.startswith("fwport verify:"):
            return ln
    return lines[-1] if lines else "(no output)"


def verify_one(orig: Path, translated: Path, entry: dict, direction: str, timeout: float,
               runtime: str = "") -> tuple[str, str, float]:
    cmd = [sys.executable, "-m", "fwport", "verify", str(orig), str(translated), "--model", entry["model"],
           "--direction", direction, "--device", "cpu", "--timeout", str(timeout)]
    if runtime in ("k2", "k3") and "--keras" not in entry.get("opts", []):  # the spec's Keras
        cmd += ["--keras", runtime[1]]
    if entry.get("args"):
        cmd += ["--args", json.dumps(entry["args"])]
    for spec in entry.get("inputs", []):
        cmd += ["--input", spec]
    cmd += entry.get("opts", [])
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="2")
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout + 60, cwd=orig.parent)
    except subprocess.TimeoutExpired:
        return "ERROR", f"no answer in {timeout + 60:.0f} s", time.perf_counter() - t0
    verdict = {0: "PASS", 1: "MISMATCH"}.get(p.returncode, "ERROR")
    return verdict, first_reason(p.stdout + "\n" + p.stderr, verdict), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--direction", choices=sorted(TABLES), default="torch2jax")
    ap.add_argument("--cache", default=os.environ.get("CORPUS_CACHE", "/tmp/rwcache"))
    ap.add_argument("--specs", help="the dev set's spec file (default /work/shared/realworld/specs_<side>.py)")
    ap.add_argument("--ids", help="comma-separated ids")
    ap.add_argument("--out", help="keep the translations here (default: a temporary folder)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per framework request")
    a = ap.parse_args(argv)
    specs = load_specs(Path(a.specs or f"/work/shared/realworld/{SPECS[a.direction]}"))
    ids = set(a.ids.split(",")) if a.ids else None
    table = TABLES[a.direction]
    rows, variants = [], []
    with tempfile.TemporaryDirectory(prefix="fwport-rwverify-") as tmp:
        out = Path(a.out or tmp)
        for s in specs:
            if ids and s["id"] not in ids:
                continue
            src = Path(a.cache) / s["local"]
            entry = table.get(s["id"], {"skip": "no entry in realworld_verify.py's table"})
            row = {"id": s["id"], "errors": None, "verdict": "SKIP", "reason": entry.get("skip", ""), "seconds": 0.0}
            if not src.is_file():
                row.update(verdict="ERROR", reason=f"{src} not in the cache")
            else:
                dest = out / s["id"] / src.name.replace(".ipynb.py", ".py")
                dest.parent.mkdir(parents=True, exist_ok=True)
                row["errors"] = translate(src, dest, a.direction)
                if "skip" not in entry:
                    row["verdict"], row["reason"], row["seconds"] = verify_one(src, dest, entry, a.direction, a.timeout,
                                                                          s.get("runtime", ""))
            rows.append(row)
            err = "-" if row["errors"] is None else str(row["errors"])
            print(f"{row['id']:<28} {err:>3} err  {row['verdict']:<8} {row['seconds']:5.1f}s  {row['reason'][:150]}",
                  flush=True)
            for label, change in entry.get("variants", {}).items() if row["errors"] is not None else ():
                v = {"id": f"{s['id']}[{label}]", "errors": row["errors"], "variant": True}
                v["verdict"], v["reason"], v["seconds"] = verify_one(src, dest, {**entry, **change}, a.direction,
                                                                     a.timeout, s.get("runtime", ""))
                variants.append(v)
                print(f"{v['id']:<28} {err:>3} err  {v['verdict']:<8} {v['seconds']:5.1f}s  {v['reason'][:150]}",
                      flush=True)
    n_pass = sum(r["verdict"] == "PASS" for r in rows)
    print(f"verify: {n_pass}/{len(rows)} pass ({sum(r['verdict'] == 'SKIP' for r in rows)} skipped, "
          f"{sum(r['verdict'] == 'MISMATCH' for r in rows)} mismatch, {sum(r['verdict'] == 'ERROR' for r in rows)} error)")
    if variants:
        print(f"variants: {sum(v['verdict'] == 'PASS' for v in variants)}/{len(variants)} pass")
    rows += variants
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
