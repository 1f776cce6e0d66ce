"""Blocklists: a side input of the blocklist stage (URL domains, document hashes, revoked source/licence pairs).

List file format (YAML or JSON, chosen by extension; ``.yml``/``.yaml`` is YAML)::

    version: "2024-06-01"            # optional label, informative only
    url_domains: [example.com, bad.org]   # a domain blocks itself and every subdomain
    doc_hashes: [<sha256 hex of the UTF-8 text>, ...]
    revoked:                          # "*" matches any source / any licence
      - {source: crawl-a, license: "*"}
      - [forum-b, CC-BY-NC-4.0]

A list's version is its :meth:`Blocklists.fingerprint` (a hash of the normalised content), so a new
list version changes the stage key of exactly the stages that take it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from fm_assets.engine.hashing import stable_hash

WILDCARD = "*"


def _normal_domain(domain: str) -> str:
    return domain.strip().lower().rstrip(".").removeprefix("*.").removeprefix(".")


@dataclass(frozen=True)
class Blocklists:
    url_domains: tuple[str, ...] = ()
    doc_hashes: tuple[str, ...] = ()
    revoked: tuple[tuple[str, str], ...] = ()

    def normalised(self) -> Blocklists:
        return Blocklists(
            url_domains=tuple(sorted({_normal_domain(d) for d in self.url_domains if _normal_domain(d)})),
            doc_hashes=tuple(sorted({h.strip().lower() for h in self.doc_hashes if h.strip()})),
            revoked=tuple(sorted({(s.strip(), lic.strip()) for s, lic in self.revoked})),
        )

    def fingerprint(self) -> str:
        """The list version: equal for lists with the same normalised content."""
        n = self.normalised()
        return stable_hash({"url_domains": n.url_domains, "doc_hashes": n.doc_hashes, "revoked": n.revoked})

    @classmethod
    def load(cls, path: str) -> Blocklists:
        text = Path(path).read_text(encoding="utf-8")
        data = yaml.safe_load(text) if path.endswith((".yml", ".yaml")) else json.loads(text)
        data = data or {}
        revoked = []
        for entry in data.get("revoked", []) or []:
            if isinstance(entry, dict):
                revoked.append((str(entry.get("source", WILDCARD)), str(entry.get("license", WILDCARD))))
            else:
                source, licence = entry
                revoked.append((str(source), str(licence)))
        return cls(
            url_domains=tuple(str(d) for d in data.get("url_domains", []) or []),
            doc_hashes=tuple(str(h) for h in data.get("doc_hashes", []) or []),
            revoked=tuple(revoked),
        ).normalised()
