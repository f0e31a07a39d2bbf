"""A builder function defined inside ``__init__`` (PyTorch-GAN's ``def discriminator_block(in_filters, out_filters,
...): layers = [nn.Conv2d(...)]; ...; return layers``, called in a loop): it takes ``*, key`` as a helper method does
and each call is given its own split (fwport/packs/torch2jax/passes/modules.py, _local_builders / _finish_init).
The translation is checked by ``fwport verify`` (forward and gradients, same weights) against PyTorch; a builder
read otherwise than as a call keeps the error."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_texts as errors, needs

PACK = load_pack("torch2jax")

GAN = """import torch
import torch.nn as nn


class Discriminator(nn.Module):
    def __init__(self, in_channels=3):
        super().__init__()

        def discriminator_block(in_filters, out_filters, first_block=False):
            layers = []
            layers.append(nn.Conv2d(in_filters, out_filters, kernel_size=3, stride=1, padding=1))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            if not first_block:  # (after the activation: a bias right before a norm has no gradient to compare)
                layers.append(nn.NORM(out_filters))
            layers.append(conv(out_filters, out_filters))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        def conv(i, o):
            return nn.Conv2d(i, o, kernel_size=3, stride=2, padding=1)

        layers = []
        in_filters = in_channels
        for i, out_filters in enumerate([4, 8]):
            layers.extend(discriminator_block(in_filters, out_filters, first_block=(i == 0)))
            in_filters = out_filters

        layers.append(nn.Conv2d(out_filters, 1, kernel_size=3, stride=1, padding=1))

        self.model = nn.Sequential(*layers)

    def forward(self, img):
        return self.model(img)
"""


def tx(src: str):
    return translate_source(src, "model.py", PACK)


def test_a_builder_function_inside_init_takes_a_key_split_per_call():
    r = tx(GAN.replace("NORM", "InstanceNorm2d"))
    assert not errors(r), errors(r)
    out = r.output
    assert "def discriminator_block(in_filters, out_filters, first_block=False, *, key):" in out, out
    assert "def conv(i, o, *, key):" in out, out
    assert "layers.append(conv(out_filters, out_filters, key=key2))" in out, out
    assert "key1, subkey = jax.random.split(key1)\n" in out, out
    assert "layers.extend(discriminator_block(in_filters, out_filters, first_block=(i == 0), key=subkey))" in out, out


@pytest.mark.parametrize("norm", ["InstanceNorm2d", "BatchNorm2d"])
@needs("torch", "equinox")
def test_a_discriminator_built_by_a_local_function_computes_what_pytorch_computes(session, tmp_path, norm):
    from fwport.verify.run import Options, verify
    src = GAN.replace("NORM", norm)
    r = tx(src)
    assert not errors(r), errors(r)
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "m_jax.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_jax.py"), "Discriminator()",
                          inputs=["float32[4,3,8,8]"], checks=("forward", "grad"), device="cpu",
                          direction="torch2jax"), session)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging") or cert


@pytest.mark.parametrize("use", ["make = discriminator_block\n        ", "blocks = [discriminator_block]\n        "])
def test_a_local_builder_read_otherwise_than_called_keeps_the_error(use):
    src = GAN.replace("NORM", "InstanceNorm2d").replace("        layers = []\n        in_filters",
                                                        f"        {use}layers = []\n        in_filters")
    r = tx(src)
    assert any("a function defined inside __init__" in e and "discriminator_block" in e for e in errors(r)), errors(r)
