"""Bucket-name rules per store and URL parsing (pure, hypothesis where it fits)."""

from __future__ import annotations

import re
import string
from functools import cache

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from skycore.storage import BucketNameError, StorageSpecError, parse_url, store_names
from skycore.storage.azure import azure_name_problem
from skycore.storage.common import bucket_name_problem, validate_bucket_name
from skycore.storage.gcs import gcs_name_problem
from skycore.storage.r2 import r2_name_problem
from skycore.storage.s3 import s3_name_problem

# Invalid names and, for each store checked with a name, the problem that store finds.
INVALID: list[tuple[str, dict[str, str]]] = [
    ("ab", dict.fromkeys(("s3", "gcs", "azure", "r2"), "3 to 63")),
    ("a" * 64, dict.fromkeys(("s3", "gcs", "r2"), "3 to 63")),
    ("My-bucket", {"s3": "lowercase"}),
    ("under_score", {"s3": "lowercase"}),
    ("-abc", {"s3": "begin and end", "r2": "begin and end"}),
    ("abc.", {"s3": "begin and end"}),
    ("a..b", {"s3": "adjacent dots"}),
    ("192.168.5.4", {"s3": "IP address"}),
    ("xn--abc", {"s3": "must not start"}),
    ("abc-s3alias", {"s3": "must not end"}),
    ("a." + "b" * 64, {"gcs": "each dot-separated part"}),
    ("goog-bucket", {"gcs": "goog"}),
    ("my-google-bucket", {"gcs": "google"}),
    ("10.0.0.1", {"gcs": "IP address"}),
    ("Upper", {"gcs": "lowercase", "r2": "lowercase letters, digits and hyphens"}),
    ("a.b.c", {"azure": "hyphens"}),
    ("a--b", {"azure": "consecutive"}),
    ("-ab", {"azure": "begin"}),
    ("A12", {"azure": "lowercase"}),
    ("with.dot", {"r2": "lowercase letters, digits and hyphens"}),
]


def invalid(store: str) -> list[tuple[str, str]]:
    """(name, problem) of every INVALID name checked with ``store``."""
    return [(name, problems[store]) for name, problems in INVALID if store in problems]


@pytest.mark.parametrize(("name", "problem"), invalid("s3"))
def test_s3_invalid(name: str, problem: str) -> None:
    assert problem in (s3_name_problem(name) or "")


@pytest.mark.parametrize("name", ["abc", "my.bucket-1", "a" * 63, "1-2-3"])
def test_s3_valid(name: str) -> None:
    assert s3_name_problem(name) is None


@pytest.mark.parametrize(("name", "problem"), invalid("gcs"))
def test_gcs_invalid(name: str, problem: str) -> None:
    assert problem in (gcs_name_problem(name) or "")


@pytest.mark.parametrize("name", ["my_bucket", "a.b.c", "x" * 63, ("a" * 60 + ".") * 3 + "abc"])
def test_gcs_valid(name: str) -> None:
    assert gcs_name_problem(name) is None


@pytest.mark.parametrize(("name", "problem"), invalid("azure"))
def test_azure_invalid(name: str, problem: str) -> None:
    assert problem in (azure_name_problem(name) or "")


def test_validate_raises_one_paragraph() -> None:
    with pytest.raises(BucketNameError) as info:
        validate_bucket_name("s3", "Bad..Name", "file_mounts./x.name")
    assert str(info.value).startswith("file_mounts./x.name: 'Bad..Name' is not a valid S3")
    assert info.value.exit_code == 2


S3_RE = re.compile(r"^(?!xn--|sthree-)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@given(st.text(string.ascii_letters + string.digits + ".-_", min_size=0, max_size=70))
def test_s3_rule_matches_reference_regex(name: str) -> None:
    expected = (
        bool(S3_RE.match(name))
        and ".." not in name
        and not re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name)
        and not name.endswith(("-s3alias", "--ol-s3", ".mrap"))
    )
    assert (s3_name_problem(name) is None) == expected


@given(st.sampled_from(store_names()), st.text(max_size=80))
def test_name_rules_never_crash(kind: str, name: str) -> None:
    problem = bucket_name_problem(kind, name)
    assert problem is None or isinstance(problem, str)
    if problem is None:
        assert 3 <= len(name) <= 222 and name == name.lower()


@pytest.mark.parametrize(
    ("url", "kind", "bucket", "prefix", "account"),
    [
        ("s3://b", "s3", "b", "", None),
        ("s3://b/a/b.txt", "s3", "b", "a/b.txt", None),
        ("gs://b/dir/", "gcs", "b", "dir", None),
        ("azure://acct/cont/x", "azure", "cont", "x", "acct"),
        ("r2://b/ckpt/", "r2", "b", "ckpt", None),
    ],
)
def test_parse_url(url: str, kind: str, bucket: str, prefix: str, account: str | None) -> None:
    u = parse_url(url)
    assert (u.store, u.bucket, u.prefix, u.account) == (kind, bucket, prefix, account)
    assert parse_url(str(u)) == u


@pytest.mark.parametrize(
    "url", ["http://x/y", "s3://", "azure://acct", "azure://acct/", "not a url", "r2://"]
)
def test_parse_url_errors(url: str) -> None:
    with pytest.raises(StorageSpecError):
        parse_url(url)


@pytest.mark.parametrize(("name", "problem"), invalid("r2"))
def test_r2_name_rules(name: str, problem: str) -> None:
    assert problem in (r2_name_problem(name) or "")
    assert r2_name_problem("my-r2-bucket-01") is None


def test_unknown_scheme_lists_the_registered_ones() -> None:
    with pytest.raises(StorageSpecError) as e:
        parse_url("ftp://b/x", "file_mounts./d")
    msg = str(e.value)
    assert "file_mounts./d" in msg and "ftp://" in msg
    for scheme in ("s3://", "gs://", "azure://", "r2://"):
        assert scheme in msg


def test_unknown_store_is_a_clear_error_listing_the_registered_ones() -> None:
    from skycore.storage import UnknownStoreError, get_store_class

    with pytest.raises(UnknownStoreError) as e:
        get_store_class("b2", "file_mounts./d.store")
    msg = str(e.value)
    assert "file_mounts./d.store" in msg and "'b2'" in msg
    assert all(name in msg for name in store_names())


# --- near-valid names, drawn from the documented rules ----------------------------------------
#
# Each store's rules written once more, as one regex per store straight from the providers'
# documentation (independently of skycore/storage/<store>.py, which they check). The names
# under test are built from the same rules: a valid name of the store's shape, then (for about
# half of them) one edit that sits on a rule's edge: lengths 2/3/63/64, the IP-address form,
# reserved prefixes and suffixes, adjacent dots, a 63/64-character dot-part, a stray
# character. So about half of the names are valid and every edge turns up.

_IPV4 = r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
REFERENCE = {
    # docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html
    "s3": re.compile(
        rf"(?!xn--|sthree-|amzn-s3-demo-)(?!.*\.\.)(?!{_IPV4}$)"
        r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
        r"(?<!-s3alias)(?<!--ol-s3)(?<!\.mrap)(?<!--x-s3)(?<!--table-s3)"
    ),
    # cloud.google.com/storage/docs/buckets#naming
    "gcs": re.compile(
        rf"(?!goog)(?!.*g(?:oo|00)gle)(?!{_IPV4}$)"
        r"(?:[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]"  # no dot: 3 to 63
        r"|(?=.{3,222}$)[a-z0-9][a-z0-9_-]{0,62}"  # dotted: up to 222, parts of 1 to 63
        r"(?:\.[a-z0-9_-]{1,63})*\.[a-z0-9_-]{0,62}[a-z0-9])"
    ),
    # learn.microsoft.com/rest/api/storageservices/naming-and-referencing-containers...
    "azure": re.compile(r"(?=.{3,63}$)[a-z0-9]+(?:-[a-z0-9]+)*"),
    # developers.cloudflare.com/r2/buckets/create-buckets/ (bucket-level naming rules)
    "r2": re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]"),
}
RULES = {
    "s3": s3_name_problem,
    "gcs": gcs_name_problem,
    "azure": azure_name_problem,
    "r2": r2_name_problem,
}


def reference_valid(store: str, name: str) -> bool:
    return REFERENCE[store].fullmatch(name) is not None


# The characters a valid name may use, and how labels join, per store.
ALPHABET = {
    "s3": "abcdefghijklmnopqrstuvwxyz0123456789-",
    "gcs": "abcdefghijklmnopqrstuvwxyz0123456789-_",
    "azure": "abcdefghijklmnopqrstuvwxyz0123456789",
    "r2": "abcdefghijklmnopqrstuvwxyz0123456789",
}
JOINER = {"s3": ".", "gcs": ".", "azure": "-", "r2": "-"}

COMMON_EDGES = ("len2", "len3", "len63", "len64", "ip", "upper", "lead-dash", "trail-dash")
EDGES = {
    "s3": (
        *COMMON_EDGES,
        *("xn--", "sthree-", "amzn-s3-demo-", "-s3alias", "--ol-s3", ".mrap", "--x-s3"),
        *("--table-s3", "dot-dot", "lead-dot", "trail-dot", "underscore"),
    ),
    "gcs": (
        *COMMON_EDGES,
        *("goog", "google", "g00gle", "dot-dot", "part63", "part64", "len222", "len223"),
        *("lead-underscore", "xn--"),
    ),
    "azure": (*COMMON_EDGES, "dash-dash", "dot", "underscore", "xn--"),
    "r2": (*COMMON_EDGES, "dot", "underscore", "dash-dash", "xn--"),
}


def _resize(name: str, n: int, pad: str) -> str:
    """``name`` made exactly ``n`` long, its first and last characters kept."""
    if len(name) >= n:
        return name[: n - 1] + name[-1] if n >= 2 else name[:n]
    middle = (pad * n)[: n - len(name)]
    return name[:-1] + middle + name[-1]


@cache
def _labels(store: str) -> st.SearchStrategy[list[str]]:
    """1 to 4 labels of ``store``'s alphabet, each starting and ending alphanumeric (built once
    per store: a strategy built inside every draw is validated again every time)."""
    edge_chars = "abcdefghijklmnopqrstuvwxyz0123456789"
    label = st.builds(
        lambda first, middle, last: first + middle + last,
        st.sampled_from(edge_chars),
        st.text(ALPHABET[store], max_size=12),
        st.sampled_from(edge_chars),
    )
    return st.lists(label, min_size=1, max_size=4)


@cache
def _edits(store: str) -> st.SearchStrategy[str]:
    """'none' or one of ``store``'s edges."""
    return st.just("none") | st.sampled_from(EDGES[store])


@st.composite
def near_valid_names(draw: st.DrawFn, store: str, edit: str | None = None) -> tuple[str, str]:
    """(name, edit): a name of ``store``'s shape and the edge edit applied to it ('none');
    ``edit`` fixes the edit instead of drawing it."""
    labels = draw(_labels(store))
    name = JOINER[store].join(labels)[:63]
    if not name[-1].isalnum():
        name = name[:-1] + "z"
    if edit is None:
        edit = draw(_edits(store))
    pos = draw(st.integers(1, max(1, len(name) - 1)))
    if edit.startswith("len"):
        name = _resize(name, int(edit[3:]), "ab" if store != "s3" else "a")
        if edit in ("len222", "len223"):
            # over 63 only with dots, parts at most 63
            name = ".".join(name[i : i + 60] for i in range(0, len(name), 61))
            name = _resize(name, int(edit[3:]), "c")
    elif edit == "ip":
        octets = draw(st.lists(st.integers(0, 300), min_size=4, max_size=4))
        name = ".".join(map(str, octets))
    elif edit == "upper":
        name = name[:pos] + name[pos].upper() + name[pos + 1 :]
    elif edit in ("lead-dash", "lead-dot", "lead-underscore"):
        name = {"lead-dash": "-", "lead-dot": ".", "lead-underscore": "_"}[edit] + name
    elif edit in ("trail-dash", "trail-dot"):
        name = name + ("-" if edit == "trail-dash" else ".")
    elif edit in ("xn--", "sthree-", "amzn-s3-demo-", "goog"):
        name = edit + name
    elif edit.startswith(("-", ".")):  # reserved suffixes
        name = name + edit
    elif edit in ("google", "g00gle", "dash-dash", "dot-dot", "dot", "underscore"):
        infix = {"dash-dash": "--", "dot-dot": "..", "dot": ".", "underscore": "_"}.get(edit, edit)
        name = name[:pos] + infix + name[pos:]
    elif edit in ("part63", "part64"):
        part = _resize("p" + name.replace(".", "")[:8] + "q", int(edit[4:]), "r")
        name = name[:pos].rstrip(".") + "." + part + "." + name[pos:].lstrip(".")
        name = name.strip(".") or part
    return name, edit


@pytest.mark.parametrize(
    ("store", "edit"),
    [(store, edit) for store in sorted(RULES) for edit in ("none", *EDGES[store])],
)
def test_near_valid_names_follow_the_documented_rules(store: str, edit: str) -> None:
    """Every edge of every store, each with its own examples (a tenth of the profile's
    budget, at least 5: 5 in fast, 10 in dev, 50 in deep and ci), checked against the
    documented rule."""

    @settings(max_examples=max(5, settings.default.max_examples // 10))
    @given(near_valid_names(store, edit))
    def check(drawn: tuple[str, str]) -> None:
        name = drawn[0]
        if edit.startswith("len"):  # the edge is really drawn
            assert len(name) == int(edit[3:]), name
        elif edit == "ip":
            assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name), name
        elif edit in ("xn--", "goog", "sthree-", "amzn-s3-demo-"):
            assert name.startswith(edit), name
        expected = reference_valid(store, name)
        event("valid" if expected else "invalid")
        problem = RULES[store](name)
        assert (problem is None) == expected, (name, edit, problem)

    check()


@pytest.mark.parametrize("store", sorted(RULES))
def test_near_valid_names_are_often_valid_and_reach_every_edge(store: str) -> None:
    """The generator is measured, not trusted: with the edit drawn too, a good share of the
    names is valid (the character soup of the tests above makes 39 of 500) and most edits turn
    up (every one is forced, and checked to be drawn, in the test above)."""
    seen: list[tuple[str, str, bool]] = []

    @settings(max_examples=300, derandomize=True, database=None)
    @given(near_valid_names(store))
    def sample(drawn: tuple[str, str]) -> None:
        seen.append((*drawn, reference_valid(store, drawn[0])))

    sample()
    valid = sum(ok for _, _, ok in seen) / len(seen)
    assert len(seen) == 300
    assert 0.4 <= valid <= 0.9, f"{store}: {valid:.0%} of {len(seen)} names valid"
    edits = {edit for _, edit, _ in seen}
    assert len(edits) >= 0.8 * (len(EDGES[store]) + 1), f"never drawn: {set(EDGES[store]) - edits}"
