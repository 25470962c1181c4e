"""Where the project's own files are: the package, and the checkout it sits in."""

from __future__ import annotations

import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent     # harness/
PROJECT = PACKAGE.parent                                     # the checkout (or site-packages)
