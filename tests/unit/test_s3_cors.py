"""S3 CORS rules (harness.store_gates.s3.cors): configuration documents, rule matching,
preflight answers and actual-response headers, as S3 has them."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from functools import cache

import botocore.session
import pytest
from botocore.model import ServiceModel
from botocore.serialize import create_serializer
from hypothesis import given
from hypothesis import strategies as st

from harness.store_gates.s3.cors import (
    NO_ORIGIN,
    NOT_ALLOWED,
    NOT_ENABLED,
    VARY,
    CorsError,
    CorsRule,
    cors_from_json,
    cors_to_json,
    cors_to_xml,
    cors_wildcard_match,
    find_rule,
    parse_cors,
    preflight,
    preflight_error,
    request_header_names,
    response_headers,
)

NS = "http://s3.amazonaws.com/doc/2006-03-01/"


@cache
def s3_model() -> ServiceModel:
    """botocore's S3 service model (loaded once)."""
    return botocore.session.get_session().get_service_model("s3")


def boto3_body(rules: list[dict[str, object]]) -> bytes:
    """The PutBucketCors body botocore sends for these CORSRules."""
    model = s3_model()
    request = create_serializer("rest-xml").serialize_to_request(
        {"Bucket": "b", "CORSConfiguration": {"CORSRules": rules}},
        model.operation_model("PutBucketCors"),
    )
    body = request["body"]
    assert isinstance(body, bytes)
    return body


def doc(*rules: str, ns: bool = True) -> bytes:
    xmlns = f' xmlns="{NS}"' if ns else ""
    return f"<CORSConfiguration{xmlns}>{''.join(rules)}</CORSConfiguration>".encode()


def rule_xml(*elements: str) -> str:
    return "<CORSRule>" + "".join(elements) + "</CORSRule>"


GET_ANY = "<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"


def error_of(xml: bytes) -> CorsError:
    with pytest.raises(CorsError) as caught:
        parse_cors(xml)
    return caught.value


def error_fields(body: bytes) -> dict[str, str]:
    return {child.tag: child.text or "" for child in ET.fromstring(body)}


# -- parsing ----------------------------------------------------------------------------


def test_parse_boto3_body_every_field() -> None:
    body = boto3_body(
        [
            {
                "ID": "web",
                "AllowedOrigins": ["https://app.example.com", "http://*.example.com"],
                "AllowedMethods": ["GET", "PUT"],
                "AllowedHeaders": ["Content-Type", "x-amz-*"],
                "ExposeHeaders": ["ETag", "x-amz-request-id"],
                "MaxAgeSeconds": 3000,
            },
            {"AllowedOrigins": ["*"], "AllowedMethods": ["HEAD"]},
        ]
    )
    assert parse_cors(body) == (
        CorsRule(
            allowed_origins=("https://app.example.com", "http://*.example.com"),
            allowed_methods=("GET", "PUT"),
            allowed_headers=("Content-Type", "x-amz-*"),
            expose_headers=("ETag", "x-amz-request-id"),
            max_age=3000,
            id="web",
        ),
        CorsRule(allowed_origins=("*",), allowed_methods=("HEAD",)),
    )


def test_parse_without_namespace_and_with_layout_whitespace() -> None:
    xml = b"""<?xml version="1.0" encoding="UTF-8"?>
    <CORSConfiguration>
      <!-- a comment -->
      <CORSRule>
        <AllowedOrigin>http://a.test</AllowedOrigin>
        <AllowedMethod>DELETE</AllowedMethod>
        <MaxAgeSeconds> 0 </MaxAgeSeconds>
      </CORSRule>
    </CORSConfiguration>"""
    assert parse_cors(xml) == (CorsRule(("http://a.test",), ("DELETE",), max_age=0),)


@pytest.mark.parametrize(
    "xml",
    [
        b"not xml",
        b"<CORSConfiguration><CORSRule>",
        doc(),  # no rule
        b"<Other>" + rule_xml(GET_ANY).encode() + b"</Other>",
        b'<CORSConfiguration xmlns="urn:other">'
        + rule_xml(GET_ANY).encode()
        + b"</CORSConfiguration>",
        doc(rule_xml("<AllowedMethod>GET</AllowedMethod>")),  # no origin
        doc(rule_xml("<AllowedOrigin>*</AllowedOrigin>")),  # no method
        doc(rule_xml("<AllowedOrigin></AllowedOrigin><AllowedMethod>GET</AllowedMethod>")),
        doc(rule_xml(GET_ANY, "<AllowedHeader></AllowedHeader>")),
        doc(rule_xml(GET_ANY, "<MaxAgeSeconds>soon</MaxAgeSeconds>")),
        doc(rule_xml(GET_ANY, "<MaxAgeSeconds>-1</MaxAgeSeconds>")),
        doc(rule_xml(GET_ANY, "<MaxAgeSeconds>1</MaxAgeSeconds><MaxAgeSeconds>2</MaxAgeSeconds>")),
        doc(rule_xml(GET_ANY, "<ID>a</ID><ID>b</ID>")),
        doc(rule_xml(GET_ANY, "<Unknown>x</Unknown>")),
        doc(rule_xml(GET_ANY, "<AllowedOrigin><b>x</b></AllowedOrigin>")),
        doc(rule_xml(GET_ANY) + "<NotARule/>"),
        doc(rule_xml(GET_ANY) + "stray text"),
        doc("<CORSRule>text" + GET_ANY + "</CORSRule>"),
        b'<!DOCTYPE x [<!ENTITY a "b">]><CORSConfiguration>'
        + rule_xml(GET_ANY).encode()
        + b"</CORSConfiguration>",
    ],
)
def test_malformed_configurations(xml: bytes) -> None:
    err = error_of(xml)
    assert (err.status, err.code) == (400, "MalformedXML")
    assert error_fields(err.xml())["Code"] == "MalformedXML"


@pytest.mark.parametrize("method", ["OPTIONS", "PATCH", "get", "*"])
def test_unsupported_method(method: str) -> None:
    err = error_of(
        doc(rule_xml(f"<AllowedOrigin>*</AllowedOrigin><AllowedMethod>{method}</AllowedMethod>"))
    )
    assert (err.status, err.code) == (400, "InvalidRequest")
    assert err.message == (
        f"Found unsupported HTTP method in CORS config. Unsupported method is {method}"
    )


def test_more_than_one_wildcard_in_origin_or_header() -> None:
    err = error_of(
        doc(
            rule_xml(
                "<AllowedOrigin>http://*.*.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
            )
        )
    )
    assert (err.status, err.code) == (400, "InvalidRequest")
    assert err.message == 'AllowedOrigin "http://*.*.com" can not have more than one wildcard.'
    err = error_of(doc(rule_xml(GET_ANY, "<AllowedHeader>**</AllowedHeader>")))
    assert err.message == 'AllowedHeader "**" can not have more than one wildcard.'


def test_rule_count_limit() -> None:
    assert len(parse_cors(doc(*[rule_xml(GET_ANY)] * 100))) == 100
    err = error_of(doc(*[rule_xml(GET_ANY)] * 101))
    assert (err.status, err.code) == (400, "InvalidRequest")
    assert "100 rules" in err.message


def test_empty_id_is_no_id() -> None:
    assert parse_cors(doc(rule_xml(GET_ANY, "<ID></ID>")))[0].id is None


# -- round trips ------------------------------------------------------------------------

_TEXT = st.text(
    st.characters(categories=("L", "N", "P", "S", "Zs"), exclude_characters="*\r"),
    min_size=1,
    max_size=12,
)
_WILD = st.one_of(_TEXT, st.tuples(_TEXT, _TEXT).map(lambda p: f"{p[0]}*{p[1]}"), st.just("*"))

rules_strategy = st.lists(
    st.builds(
        CorsRule,
        allowed_origins=st.lists(_WILD, min_size=1, max_size=3).map(tuple),
        allowed_methods=st.lists(
            st.sampled_from(["GET", "PUT", "HEAD", "POST", "DELETE"]), min_size=1, max_size=5
        ).map(tuple),
        allowed_headers=st.lists(_WILD, max_size=3).map(tuple),
        expose_headers=st.lists(_TEXT, max_size=3).map(tuple),
        max_age=st.one_of(st.none(), st.integers(0, 10**9)),
        id=st.one_of(st.none(), _TEXT),
    ),
    min_size=1,
    max_size=4,
).map(tuple)


@given(rules_strategy)
def test_xml_round_trip(rules: tuple[CorsRule, ...]) -> None:
    xml = cors_to_xml(rules)
    assert ET.fromstring(xml).tag == f"{{{NS}}}CORSConfiguration"
    assert parse_cors(xml) == rules


@given(rules_strategy)
def test_json_round_trip(rules: tuple[CorsRule, ...]) -> None:
    assert cors_from_json(cors_to_json(rules)) == rules


@given(rules_strategy)
def test_boto3_body_parses_to_the_same_rules(rules: tuple[CorsRule, ...]) -> None:
    assert parse_cors(boto3_body(cors_to_json(rules))) == rules


def test_get_bucket_cors_body_reads_back_through_botocore() -> None:
    from botocore.parsers import create_parser

    rules = (CorsRule(("*",), ("GET",), ("*",), ("ETag",), 60, "r1"),)
    model = s3_model()
    parsed = create_parser("rest-xml").parse(
        {"status_code": 200, "headers": {}, "body": cors_to_xml(rules)},
        model.operation_model("GetBucketCors").output_shape,
    )
    assert parsed["CORSRules"] == cors_to_json(rules)


@pytest.mark.parametrize(
    "data",
    [
        {},
        [1],
        [{"AllowedOrigins": "x", "AllowedMethods": ["GET"]}],
        [{"AllowedOrigins": ["x"], "AllowedMethods": ["GET"], "Other": 1}],
        [{"AllowedOrigins": ["x"], "AllowedMethods": ["GET"], "MaxAgeSeconds": "1"}],
        [{"AllowedOrigins": ["x"], "AllowedMethods": ["GET"], "MaxAgeSeconds": True}],
        [{"AllowedOrigins": ["x"], "AllowedMethods": ["GET"], "ID": 3}],
    ],
)
def test_from_json_refuses_other_data(data: object) -> None:
    with pytest.raises(ValueError):
        cors_from_json(data)


# -- matching ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("http://a.com", "http://a.com", True),
        ("http://a.com", "http://A.com", False),
        ("http://a.com", "http://a.com:80", False),
        ("http://a.com", "https://a.com", False),
        ("*", "", True),
        ("*", "anything", True),
        ("http://*.a.com", "http://x.a.com", True),
        ("http://*.a.com", "http://x.y.a.com", True),
        ("http://*.a.com", "http://.a.com", True),
        ("http://*.a.com", "https://x.a.com", False),
        ("http://*.a.com", "http://a.com", False),
        ("http*", "https://x", True),
        ("*.com", "http://x.com", True),
        ("*.com", "http://x.org", False),
        ("ab*ba", "aba", False),  # head and tail may not overlap
        ("ab*ba", "abba", True),
    ],
)
def test_wildcard_match(pattern: str, value: str, matches: bool) -> None:
    assert cors_wildcard_match(pattern, value) is matches


@given(_TEXT, _TEXT, _TEXT)
def test_wildcard_matches_whatever_fills_it(head: str, middle: str, tail: str) -> None:
    assert cors_wildcard_match(f"{head}*{tail}", head + middle + tail)
    assert cors_wildcard_match(head + tail, head + tail)


@given(_TEXT, _TEXT, _TEXT)
def test_wildcard_refuses_what_does_not_fit(head: str, middle: str, tail: str) -> None:
    """The text before the ``*`` must start the value, the text after it end it, without
    overlapping; without a ``*`` the whole value must be equal."""
    assert not cors_wildcard_match(f"{head}x*{tail}", f"{head}y{middle}{tail}")
    assert not cors_wildcard_match(f"{head}*x{tail}", f"{head}{middle}y{tail}")
    assert not cors_wildcard_match(f"{head}*{tail}", (head + tail)[:-1])
    assert not cors_wildcard_match(f"{head}*{tail}", middle + "\r")
    assert not cors_wildcard_match(head + tail, head + middle + tail)


def test_request_header_names() -> None:
    assert request_header_names(None) == ()
    assert request_header_names("") == ()
    assert request_header_names(" Content-Type ,X-Amz-Date,, ") == ("content-type", "x-amz-date")


def test_first_matching_rule_wins() -> None:
    a = CorsRule(("http://a.com",), ("PUT",))
    b = CorsRule(("http://*.com",), ("GET", "PUT"), id="b")
    c = CorsRule(("*",), ("GET",), id="c")
    rules = (a, b, c)
    assert find_rule(rules, "http://a.com", "PUT") is a
    assert find_rule(rules, "http://a.com", "GET") is b
    assert find_rule(rules, "http://x.org", "GET") is c
    assert find_rule(rules, "http://x.org", "PUT") is None
    assert find_rule(rules, "http://a.com", "DELETE") is None
    assert find_rule(None, "http://a.com", "GET") is None


def test_headers_decide_the_rule_in_a_preflight() -> None:
    bare = CorsRule(("*",), ("PUT",), id="bare")
    typed = CorsRule(("*",), ("PUT",), ("content-type",), id="typed")
    amz = CorsRule(("*",), ("PUT",), ("Content-*", "X-AMZ-*"), id="amz")
    rules = (bare, typed, amz)
    assert find_rule(rules, "o", "PUT", ()) is bare
    assert find_rule(rules, "o", "PUT", ("content-type",)) is typed
    assert find_rule(rules, "o", "PUT", ("content-type", "x-amz-date")) is amz
    assert find_rule(rules, "o", "PUT", ("content-md5",)) is amz
    assert find_rule(rules, "o", "PUT", ("authorization",)) is None


# -- preflight --------------------------------------------------------------------------

RULES = (
    CorsRule(
        ("https://app.example.com", "http://*.example.com"),
        ("PUT", "POST", "DELETE"),
        ("*",),
        ("x-amz-server-side-encryption", "ETag"),
        3000,
    ),
    CorsRule(("*",), ("GET",), ("Content-Type",), max_age=None),
)


def test_preflight_specific_origin() -> None:
    status, headers, body = preflight(
        RULES, "http://cdn.example.com", "PUT", "Content-Type, X-Amz-Date"
    )
    assert (status, body) == (200, b"")
    assert headers == {
        "Access-Control-Allow-Origin": "http://cdn.example.com",
        "Access-Control-Allow-Credentials": "true",
        "Access-Control-Allow-Methods": "PUT, POST, DELETE",
        "Access-Control-Allow-Headers": "content-type, x-amz-date",
        "Access-Control-Expose-Headers": "x-amz-server-side-encryption, ETag",
        "Access-Control-Max-Age": "3000",
        "Vary": VARY,
    }


def test_preflight_any_origin() -> None:
    status, headers, _ = preflight(RULES, "http://elsewhere.org", "GET", None)
    assert status == 200
    assert headers == {
        "Access-Control-Allow-Origin": "*",
        "Access-Control-Allow-Methods": "GET",
        "Vary": VARY,
    }
    status, headers, _ = preflight(RULES, "http://elsewhere.org", "GET", "content-type")
    assert headers["Access-Control-Allow-Headers"] == "content-type"


def test_preflight_max_age_zero_is_sent() -> None:
    _, headers, _ = preflight((CorsRule(("*",), ("GET",), max_age=0),), "o", "GET", None)
    assert headers["Access-Control-Max-Age"] == "0"


@pytest.mark.parametrize(
    ("origin", "method", "request_headers"),
    [
        ("http://elsewhere.org", "PUT", None),  # origin allowed only for GET
        ("http://elsewhere.org", "GET", "x-amz-date"),  # header not allowed
        ("https://cdn.example.com", "PUT", None),  # scheme differs
        ("https://app.example.com:443", "PUT", None),  # port differs
        ("http://cdn.example.com", "HEAD", None),  # no rule allows HEAD
    ],
)
def test_preflight_not_allowed(origin: str, method: str, request_headers: str | None) -> None:
    status, headers, body = preflight(RULES, origin, method, request_headers)
    assert status == 403
    assert headers == {"Content-Type": "application/xml"}
    fields = error_fields(body)
    assert (fields["Code"], fields["Message"]) == ("AccessForbidden", NOT_ALLOWED)
    assert (fields["Method"], fields["ResourceType"]) == (method, "OBJECT")


@pytest.mark.parametrize("rules", [None, ()])
def test_preflight_without_configuration(rules: tuple[CorsRule, ...] | None) -> None:
    status, _, body = preflight(rules, "http://a.com", "GET", None, resource_type="BUCKET")
    fields = error_fields(body)
    assert (status, fields["Code"], fields["Message"]) == (403, "AccessForbidden", NOT_ENABLED)
    assert fields["ResourceType"] == "BUCKET"


@pytest.mark.parametrize("rules", [None, RULES])
def test_preflight_without_origin(rules: tuple[CorsRule, ...] | None) -> None:
    for origin in (None, ""):
        status, _, body = preflight(rules, origin, "GET", None)
        fields = error_fields(body)
        assert (status, fields["Code"], fields["Message"]) == (400, "BadRequest", NO_ORIGIN)


@pytest.mark.parametrize(
    ("method", "shown"), [(None, "null"), ("", "null"), ("OPTIONS", "OPTIONS"), ("get", "get")]
)
def test_preflight_without_valid_request_method(method: str | None, shown: str) -> None:
    status, _, body = preflight(RULES, "http://a.com", method, None)
    fields = error_fields(body)
    assert (status, fields["Code"]) == (400, "BadRequest")
    assert fields["Message"] == f"Invalid Access-Control-Request-Method: {shown}"
    assert preflight_error("http://a.com", method) == (
        status,
        {"Content-Type": "application/xml"},
        body,
    )


def test_preflight_error_none_when_complete() -> None:
    assert preflight_error("http://a.com", "GET") is None


# -- actual responses -------------------------------------------------------------------


def test_response_headers_first_rule_for_origin_and_method() -> None:
    assert response_headers(RULES, "https://app.example.com", "DELETE") == {
        "Access-Control-Allow-Origin": "https://app.example.com",
        "Access-Control-Allow-Credentials": "true",
        "Access-Control-Allow-Methods": "PUT, POST, DELETE",
        "Access-Control-Expose-Headers": "x-amz-server-side-encryption, ETag",
        "Access-Control-Max-Age": "3000",
        "Vary": VARY,
    }
    assert response_headers(RULES, "https://app.example.com", "GET") == {
        "Access-Control-Allow-Origin": "*",
        "Access-Control-Allow-Methods": "GET",
        "Vary": VARY,
    }


def test_response_headers_ignore_allowed_headers() -> None:
    rules = (CorsRule(("http://a.com",), ("GET",), ("x-only",)),)
    assert "Access-Control-Allow-Headers" not in response_headers(rules, "http://a.com", "GET")
    assert (
        response_headers(rules, "http://a.com", "GET")["Access-Control-Allow-Origin"]
        == "http://a.com"
    )


@pytest.mark.parametrize(
    ("rules", "origin", "method"),
    [
        (RULES, None, "GET"),
        (RULES, "", "GET"),
        (RULES, "http://x.org", "PUT"),
        (RULES, "http://x.org", None),
        (None, "http://x.org", "GET"),
    ],
)
def test_response_headers_none(
    rules: tuple[CorsRule, ...] | None, origin: str | None, method: str | None
) -> None:
    assert response_headers(rules, origin, method) == {}
