"""The forms of a Ray address, read without I/O: each form Ray's job client takes, and the
values refused with what to give instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.settings.process import Settings
from specs.settings.rayaddress import Auto, DashboardUrl, HostPort, parse_ray_address


@pytest.mark.parametrize(
    ("given", "form"),
    [
        ("http://head:8265", DashboardUrl("http://head:8265")),
        ("https://ray.example.com/dash/", DashboardUrl("https://ray.example.com/dash")),
        ("head:6379", HostPort("head", 6379)),
        (" 10.0.0.5:8265 ", HostPort("10.0.0.5", 8265)),
        ("[::1]:6379", HostPort("::1", 6379)),
        ("auto", Auto()),
    ],
)
def test_each_form_ray_takes(given: str, form: object) -> None:
    assert parse_ray_address(given) == form


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("ray://head:10001", "Ray Client address"),
        ("grpc://head:6379", "scheme grpc://"),
        ("head", "has no port"),
        ("head:http", "not host:port"),
        ("head:6379/x", "not host:port"),
        ("http://:8265", "names no host"),
        ("", "empty"),
    ],
)
def test_a_value_of_no_form_says_what_to_give(given: str, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_ray_address(given)
    message = str(caught.value)
    assert says in message
    assert "http://HOST:8265" in message and "HOST:6379" in message and "auto" in message


def test_settings_refuse_a_ray_client_address(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Ray Client address"):
        Settings(tasks_dir=tmp_path, address="ray://head:10001")
    assert Settings(tasks_dir=tmp_path, address="head:6379").address == "head:6379"
