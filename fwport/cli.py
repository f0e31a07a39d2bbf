"""The command line. Renders results; the library underneath never prints."""
from __future__ import annotations

import sys

import click

from fwport.finding import Severity


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fwport")
def main() -> None:
    """Translate deep-learning code between frameworks and prove the result is the same model."""


@main.command("tf2torch")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
def tf2torch(paths: tuple[str, ...]) -> None:
    """TensorFlow/Keras source → PyTorch source."""
    from fwport.translate import translate_source

    worst = 0
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            src = fh.read()
        r = translate_source(src, p)
        sys.stdout.write(r.output)
        for f in r.findings:
            click.echo(f.render(), err=True)
        if r.needs_attention:
            worst = max(worst, 1)
    sys.exit(worst)
