"""The report every infopt call returns: the same data the command prints, writes with
``--report`` and ``--json``."""

import html
import json
from typing import Any, Dict


class Report:
    """A command's report. Read it as a dict (``report["ops"]``, ``report.to_dict()``)
    or by attribute (``report.verification``); render it with ``to_json()``,
    ``to_markdown()``, ``str()`` (the command's terminal table); notebooks show it as
    HTML."""

    __slots__ = ("command", "_json", "_markdown", "_text", "_dict")

    def __init__(self, command: str, json_text: str, markdown: str, text: str):
        #: The command that made it: "optimize", "build-engine", "compare", ...
        self.command = command
        self._json = json_text
        self._markdown = markdown
        self._text = text
        self._dict = None

    def to_dict(self) -> Dict[str, Any]:
        """The report as plain Python values (a fresh copy each call)."""
        return json.loads(self._json)

    def _data(self) -> Dict[str, Any]:
        if self._dict is None:
            self._dict = json.loads(self._json)
        return self._dict

    def to_json(self, indent: int = 2) -> str:
        """The JSON the command writes with ``--json`` (``schema_version`` inside)."""
        if indent == 2:
            return self._json
        return json.dumps(self._data(), indent=indent)

    def to_markdown(self) -> str:
        """Markdown, as ``--report FILE.md`` writes it (fit for a pull-request comment)."""
        return self._markdown

    def __getitem__(self, key: str) -> Any:
        return self._data()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data()

    def keys(self):
        return self._data().keys()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._data()[name]
        except KeyError:
            raise AttributeError(
                f"{self.command} report has no field {name!r}; fields: {', '.join(self._data())}"
            ) from None

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<infopt {self.command} report>\n{self._text.rstrip()}"

    def _repr_html_(self) -> str:
        return (
            f"<div><strong>infopt {html.escape(self.command)} report</strong>"
            f"<pre>{html.escape(self._text)}</pre></div>"
        )
