"""`slm-rerank review bench`: the trust benchmark (docs/review-bench.md).

Without ``--live`` no model is asked: the deterministic gates run over the shipped corpus
and the command exits 1 when a candidate is not treated as labelled (a supported one
dropped, or a fabricated or invented one reported), so it can guard the gates in CI.
``--live`` then also reviews the seeded set with a model server and measures the semantic
gates; a server that does not answer is a visible degrade, not a failure.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from slm_rerank.errors import SlmRerankError
from slm_rerank.report import visible
from slm_rerank_review.trust_labels import CORPUS, CorpusError


def _clean(text: str) -> str:
    # the corpus may be a user's (--corpus), a message a server's: no control character
    # of theirs reaches the terminal
    return visible(text, keep_lines=True)


@click.command("bench")
@click.option("--live", is_flag=True,
              help="Also review the seeded set with a model server and measure the semantic "
                   "gates (needs a server: -e URL, SLM_ENDPOINT or one on 8033-8040).")
@click.option("-e", "--endpoint", "base_url", metavar="URL",
              help="The model server --live asks (default: as a search finds one).")
@click.option("--model", metavar="NAME", help="--live: the model profile to use.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N",
              help="--live: only the first N seeded cases (each costs a few model calls).")
@click.option("--case", "cases", multiple=True, metavar="NAME",
              help="--live: only this seeded case (repeat for more; see trust_corpus/seeded).")
@click.option("--timeout", type=click.FloatRange(min=1.0), metavar="SECONDS",
              help="--live: the deadline of each seeded case, all its calls included "
                   "(default 600).")
@click.option("--max-tokens", type=click.IntRange(min=8, max=4096), metavar="N",
              help="--live: tokens each chunk's answer may take (default: the review's).")
@click.option("--corpus", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=CORPUS, show_default="the corpus shipped with the plugin",
              help="A corpus of the same layout (trust_corpus/README.md).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench(live: bool, base_url: str | None, model: str | None, limit: int | None,
          cases: tuple[str, ...], timeout: float | None, max_tokens: int | None,
          corpus: Path, as_json: bool) -> None:
    """Measure how much of what a review reports is grounded: the trust benchmark.

    Runs the review's gates over labelled candidate findings (supported, fabricated,
    symbol-invented, injected) and prints the precision of what is reported with no gate,
    with the evidence gate, with the identifier gate too and with the code gate too, and
    the drops by reason.
    """
    from slm_rerank_review import trust_bench

    if not live and (base_url or model or limit or cases or timeout or max_tokens):
        raise click.UsageError("-e/--endpoint, --model, --limit, --case, --timeout and "
                               "--max-tokens are for --live")
    try:
        result = trust_bench.run_deterministic(corpus)
    except CorpusError as exc:
        raise click.ClickException(_clean(str(exc))) from None
    document: dict[str, object] = {"deterministic": trust_bench.to_json(result)}
    text = trust_bench.render_text(result)
    if live:
        from slm_rerank_review import trust_live, trust_measures

        def progress(case: str) -> None:
            click.echo(f"slm-rerank review bench: reviewing {case} ...", err=True)

        try:
            measured = trust_live.run_live(corpus, base_url=base_url, model=model,
                                           limit=limit, timeout=timeout, only=cases,
                                           max_tokens=max_tokens, progress=progress)
        except (CorpusError, SlmRerankError) as exc:  # a bad setting, a URL that is no server
            raise click.ClickException(_clean(str(exc))) from None
        document["live"] = trust_measures.to_json(measured)
        text += "\n" + trust_measures.render_text(measured)
        if measured.degraded:
            click.echo(f"slm-rerank review bench: --live degraded: {_clean(measured.degraded)}",
                       err=True)
    # JSON escapes every control character itself
    click.echo(json.dumps(document, indent=2) if as_json else _clean(text), nl=as_json)
    if not result.passed:
        click.echo(f"slm-rerank review bench: {len(result.mismatches)} candidate(s) not "
                   "treated as labelled (listed above); the gates let through or dropped "
                   "what they must not", err=True)
        sys.exit(1)
