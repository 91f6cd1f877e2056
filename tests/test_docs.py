"""Issue 28, item 6: the README is a front door, the manual is in docs/, and its links hold."""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from tests.layer_contract import layers

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
ARCHITECTURE = DOCS / "architecture.md"
PACKAGE = ROOT / "orchestrator"


def pages() -> list[Path]:
    """The README and every page of the manual."""
    return [README, *sorted(DOCS.glob("*.md"))]


def tokens(page: Path) -> list[Token]:
    return MarkdownIt("commonmark").enable("table").parse(page.read_text())


def inline_children(page: Path) -> Iterator[Token]:
    for token in tokens(page):
        yield from token.children or ()


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor on the page (a repeated heading gets -1, -2, ... as on GitHub)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    stream = tokens(page)
    for opening, inline in pairwise(stream):
        if opening.type != "heading_open":
            continue
        text = "".join(child.content for child in inline.children or ())
        base = slug(text)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    """The targets of the page's links that point into the repository (not code, not the web)."""
    hrefs = [str(t.attrs["href"]) for t in inline_children(page) if t.type == "link_open"]
    return [href for href in hrefs if not urlsplit(href).scheme and not href.startswith("//")]


def broken_links(page: Path) -> list[str]:
    """Each relative link of the page whose file or #anchor does not exist, with why."""
    broken = []
    for href in relative_links(page):
        parts = urlsplit(href)
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if not target.exists():
            broken.append(f"{page.name}: {href} (no such file)")
        elif parts.fragment and target.suffix == ".md" and parts.fragment not in anchors(target):
            broken.append(f"{page.name}: {href} (no such heading in {target.name})")
    return broken


def packages() -> list[str]:
    """Every package under orchestrator/, as its path from there (`tools/mcp`)."""
    return sorted(
        init.parent.relative_to(PACKAGE).as_posix()
        for init in PACKAGE.rglob("__init__.py")
        if init.parent != PACKAGE and "__pycache__" not in init.parts
    )


def test_the_readme_is_a_front_door_of_at_most_200_lines():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    for command in ("scripts/setup.sh", ".venv/bin/orchestrator chat", ".venv/bin/pytest"):
        assert command in text, command


def test_the_readme_names_every_benchmark():
    benchmarks = sorted(path.name for path in (ROOT / "scripts").glob("bench_*.py"))
    assert benchmarks, "the repository ships benchmarks"
    missing = [name for name in benchmarks if f"scripts/{name}" not in README.read_text()]
    assert missing == []


def test_the_readme_links_every_page_of_the_manual():
    assert sorted(DOCS.glob("*.md")), "the manual is in docs/"
    linked = {(README.parent / urlsplit(href).path).resolve() for href in relative_links(README)}
    assert [page.name for page in sorted(DOCS.glob("*.md")) if page.resolve() not in linked] == []


def test_every_relative_link_resolves():
    assert len(pages()) > 1, "the manual is in docs/"
    assert [problem for page in pages() for problem in broken_links(page)] == []


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path: Path):
    (tmp_path / "other.md").write_text("# The `tool_config.yaml` reference\n\n## Asking you\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Here\n\n[ok](other.md#the-tool_configyaml-reference) [ok](other.md#asking-you)"
        " [ok](#here) [web](https://example.com/x.md) `[code](nowhere.md)`\n\n"
        "[gone](missing.md) [no heading](other.md#asking) [not here](#there)\n"
    )

    assert broken_links(page) == [
        "page.md: missing.md (no such file)",
        "page.md: other.md#asking (no such heading in other.md)",
        "page.md: #there (no such heading in page.md)",
    ]


def test_the_architecture_page_names_every_package():
    found = packages()
    assert "cli" in found and "store" in found, found
    text = ARCHITECTURE.read_text()
    unnamed = [name for name in found if not re.search(rf"(?<![\w/]){re.escape(name)}/", text)]
    assert unnamed == [], (
        "docs/architecture.md's layout names every package, as its path: cli/, tools/mcp/"
    )


def test_the_architecture_page_says_the_layer_order_and_where_to_add_things():
    text = ARCHITECTURE.read_text()
    assert "## Layer order" in text and "## Where to add" in text
    for thing in (
        "tool middleware",
        "model middleware",
        "tool source",
        "command",
        "shipped agent",
        "table",
    ):
        assert f"| a {thing}" in text, thing


TOOL_CALLS = DOCS / "tool-calls.md"


def chain_diagrams(page: Path) -> list[list[str]]:
    """The steps of each chain `page` draws (a `text` block of `a -> b -> ...`), in order."""
    return [
        [step.strip() for step in " ".join(token.content.split()).split("->")]
        for token in tokens(page)
        if token.type == "fence" and token.info.strip() == "text" and "->" in token.content
    ]


def test_the_chain_diagrams_are_the_order_the_defaults_are_built_in(monkeypatch):
    from orchestrator.dispatch import (
        ask_approval,
        background,
        large_results,
        log,
        result_cache,
        retry,
        scope_check,
        validate,
    )
    from orchestrator.dispatch.dispatcher import default_middleware
    from orchestrator.dispatch.tool_budget import ToolBudgetMiddleware
    from orchestrator.dispatch.tool_tracing import ToolTracingMiddleware
    from orchestrator.dispatch.tool_usage import ToolUsageMiddleware
    from orchestrator.graph import AgentSpec
    from orchestrator.graph.model_pipeline import (
        compaction,
        model_budget,
        model_tracing,
        model_usage,
        reply_check,
        reply_cut,
        retrieval,
        round_limit,
        written_calls,
    )
    from orchestrator.graph.model_pipeline.defaults import default_model_middleware
    from orchestrator.levels import Limits
    from orchestrator.testing import ScriptedChatModel

    # What each middleware is called in the diagrams.
    tool_steps: dict[type, str] = {
        ToolTracingMiddleware: "tracing (when on)",
        log.RequestLogMiddleware: "request log",
        large_results.LargeResultMiddleware: "large results",
        scope_check.ScopeMiddleware: "AI scope",
        validate.ValidationMiddleware: "validation",
        ToolBudgetMiddleware: "budget",
        ask_approval.ApprovalMiddleware: "approval (your decision)",
        result_cache.ResultCacheMiddleware: "result cache",
        background.BackgroundMiddleware: "background handover",
        ToolUsageMiddleware: "usage",
        retry.TimeoutRetryMiddleware: "timeout + retry",
    }
    model_steps: dict[type, str] = {
        round_limit.RoundLimitMiddleware: "round limit",
        retrieval.RetrievalMiddleware: "RAG context",
        model_budget.ModelBudgetMiddleware: "budget",
        compaction.CompactionMiddleware: "compaction",
        reply_cut.ReplyCutMiddleware: "reply cut",
        written_calls.TextCallsMiddleware: "text tool calls",
        reply_check.ReplyCheckMiddleware: "reply check",
        model_tracing.ModelTracingMiddleware: "tracing (when on)",
        model_usage.ModelUsageMiddleware: "usage",
    }

    async def retriever(query: str, *, user_id: str, session_id: str) -> str:
        return ""

    # Every default on: tracing (an OTLP endpoint set), RAG, calls written as text.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    limits = Limits(max_iterations=3, max_result_chars=1000, timeout_seconds=60.0)
    spec = AgentSpec(model=ScriptedChatModel(), tools=[], limits=limits, retriever=retriever)
    tools = [tool_steps[type(layer)] for layer in default_middleware()]
    models = [model_steps[type(layer)] for layer in default_model_middleware(spec)]

    assert chain_diagrams(TOOL_CALLS) == [
        ["yours", *tools, "the tool"],
        ["yours", *models, "the model"],
    ]


def code_block(page: Path, heading: str) -> str:
    """The first code block after `heading` on the page."""
    after = page.read_text().split(f"\n{heading}\n", 1)[1]
    return after.split("```text\n", 1)[1].split("```", 1)[0]


def diagram_layers() -> list[list[str]]:
    """The layers the diagram of docs/architecture.md draws, top first, each as its names.

    A layer's line starts two spaces in; its names are separated by ` | `, as in the
    contract, and end at the first run of two spaces (its description, if any).
    """
    lines = code_block(ARCHITECTURE, "## Layer order").splitlines()
    return [
        re.split(r"\s{2,}", line.strip())[0].split(" | ")
        for line in lines
        if re.match(r"^  [^\s│]", line)
    ]


def test_the_layer_diagram_draws_the_contract():
    """pyproject.toml's import-linter contract is the one statement of the order; the diagram
    draws it, a package as `name/`."""
    drawn = diagram_layers()
    assert [{name.removesuffix("/") for name in layer} for layer in drawn] == [
        set(layer) for layer in layers()
    ]
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    misdrawn = [n for layer in drawn for n in layer if n.endswith("/") != (n.rstrip("/") in packages)]
    assert misdrawn == [], "a package is drawn as `name/`, a module as `name`"


def layout_entries() -> dict[str, str]:
    """The Layout's entries of docs/architecture.md by their first word (`graph/planning/`)."""
    entries: dict[str, str] = {}
    first = ""
    for line in code_block(ARCHITECTURE, "## Layout").splitlines():
        if match := re.match(r"^  (\S+)", line):
            first = match.group(1).rstrip(",")
        if first:
            entries[first] = entries.get(first, "") + line + "\n"
    return entries


def unnamed_modules() -> list[str]:
    """The modules the Layout leaves out: a package's in its entry, the root's as `name.py`."""
    entries = layout_entries()
    layout = "".join(entries.values())
    missing = [
        f"{path.name}" for path in sorted(PACKAGE.glob("*.py"))
        if path.stem != "__init__" and not re.search(rf"(?<![\w/]){re.escape(path.name)}", layout)
    ]
    for package in packages():
        entry = entries.get(f"{package}/", "")
        modules = sorted(p.stem for p in (PACKAGE / package).glob("*.py") if p.stem != "__init__")
        missing += [
            f"{package}/{name}.py"
            for name in modules
            if not re.search(rf"(?<![\w/]){re.escape(name)}(?!\w)", entry)
        ]
    return missing


def test_the_architecture_page_names_every_module_in_its_package_entry():
    assert "dispatch/" in layout_entries()
    assert unnamed_modules() == []


def test_the_testing_page_names_every_test_folder():
    tests = ROOT / "tests"
    folders = sorted({p.relative_to(tests).parts[0] for p in tests.glob("*/**/test_*.py")})
    assert "store" in folders, folders
    text = (DOCS / "testing.md").read_text()
    unnamed = [name for name in folders if not re.search(rf"`(tests/)?{re.escape(name)}/`", text)]
    assert unnamed == []
