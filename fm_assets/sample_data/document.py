"""The sample corpus' document record, default packages and their licences."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

DEFAULT_PACKAGES: tuple[str, ...] = ("debian-handbook", "gnome-user-docs", "python3.11-doc")
FALLBACK_PACKAGE = "python-stdlib"
FILES_PER_PACKAGE = 4

# Licences of the default packages (from their debian/copyright); others are read from the .deb.
KNOWN_LICENSES = {
    "debian-handbook": "GPL-2.0-or-later OR CC-BY-SA-3.0",
    "gnome-user-docs": "CC-BY-SA-3.0",
    "python3.11-doc": "PSF-2.0",
    FALLBACK_PACKAGE: "PSF-2.0",
}

Source = Literal["auto", "apt", "python"]


@dataclass(frozen=True)
class Document:
    text: str
    url: str
    title: str
    lang_hint: str
    package: str
    license: str

    def to_json(self) -> str:
        return json.dumps(
            {
                "text": self.text,
                "url": self.url,
                "title": self.title,
                "lang_hint": self.lang_hint,
                "package": self.package,
                "license": self.license,
            },
            ensure_ascii=False,
        )
