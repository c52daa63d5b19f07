"""A tiny block document (headings, paragraphs, lists, code, tables, images) rendered as Markdown and as one
self-contained HTML page (images inlined), for ``tuner report`` and ``tuner history``."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Doc:
    """A tiny block document rendered both as Markdown and as self-contained HTML."""

    title: str
    blocks: list[tuple[Any, ...]] = field(default_factory=list)

    def h(self, text: str) -> None:
        self.blocks.append(("h", text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def bullets(self, items: Sequence[str]) -> None:
        self.blocks.append(("ul", list(items)))

    def code(self, text: str) -> None:
        self.blocks.append(("code", text))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.blocks.append(("table", list(headers), [list(r) for r in rows]))

    def image(self, file: Path, caption: str) -> None:
        self.blocks.append(("img", file, caption))

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for block in self.blocks:
            kind = block[0]
            if kind == "h":
                out += [f"## {block[1]}", ""]
            elif kind == "p":
                out += [block[1], ""]
            elif kind == "ul":
                out += [f"- {item}" for item in block[1]] + [""]
            elif kind == "code":
                out += ["```", block[1].rstrip("\n"), "```", ""]
            elif kind == "table":
                headers, rows = block[1], block[2]
                out.append("| " + " | ".join(_md_cell(h) for h in headers) + " |")
                out.append("|" + "|".join("---" for _ in headers) + "|")
                out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
                out.append("")
            elif kind == "img":
                out += [f"![{block[2]}]({block[1].name})", "", f"*{block[2]}*", ""]
        return "\n".join(out).rstrip("\n") + "\n"

    def html(self) -> str:
        body = [f"<h1>{_inline(self.title)}</h1>"]
        for block in self.blocks:
            kind = block[0]
            if kind == "h":
                body.append(f"<h2>{_inline(block[1])}</h2>")
            elif kind == "p":
                body.append(f"<p>{_inline(block[1])}</p>")
            elif kind == "ul":
                body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block[1]) + "</ul>")
            elif kind == "code":
                body.append(f"<pre><code>{html.escape(block[1])}</code></pre>")
            elif kind == "table":
                head = "".join(f"<th>{_inline(h)}</th>" for h in block[1])
                rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in block[2])
                body.append(
                    f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'
                )
            elif kind == "img":
                data = base64.b64encode(block[1].read_bytes()).decode("ascii")
                caption = _inline(block[2])
                body.append(
                    f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(block[2])}">'
                    f"<figcaption>{caption}</figcaption></figure>"
                )
        return _HTML_PAGE.format(title=html.escape(self.title), css=_CSS, body="\n".join(body))


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", "<br>")


def _inline(text: str) -> str:
    """Escape, then render the only inline Markdown the report uses: `code` and **bold**."""
    escaped = html.escape(str(text))
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    escaped = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", escaped)
    return escaped.replace("\n", "<br>")


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1100px;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3rem; }
h2 { margin-top: 2rem; border-bottom: 1px solid #eee; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #ddd; padding: .25rem .55rem; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
tbody tr:nth-child(even) { background: #fafafa; }
.scroll { overflow-x: auto; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: .85rem; }
pre { background: #f6f8fa; padding: .6rem; overflow-x: auto; }
figure { margin: 1rem 0 2rem; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: .9rem; }
"""

_HTML_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
{body}
</body>
</html>
"""
