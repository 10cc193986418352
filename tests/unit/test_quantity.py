"""model/quantity.py: the API server's quantities as numbers, read without the kubernetes client."""

from decimal import Decimal

import pytest
from kubernetes.utils.quantity import parse_quantity as clients_parser

from mydb_operator.model.quantity import parse_quantity

TAKEN = ["100Gi", "1.5Gi", ".5Ki", "1023Ki", "1Mi", "2Ti", "1Pi", "3Ei", "100m", "5n", "3u", "0.1m", "1", "0",
         "1.", "+1k", "-2M", "500M", "1G", "7T", "2P", "1E", "1e3", "1E3", "1E-2", "2.5e+2", "1048576",
         "12345678901234567890Ei"]


@pytest.mark.parametrize("text", TAKEN)
def test_a_quantity_reads_as_the_clients_parser_reads_it(text):
    assert parse_quantity(text) == clients_parser(text)


def test_binary_and_decimal_suffixes():
    assert parse_quantity("100Gi") == 100 * 2**30
    assert parse_quantity("1.5Gi") == 1536 * 2**20
    assert parse_quantity("500M") == 500_000_000
    assert parse_quantity("250m") == Decimal("0.25")
    assert parse_quantity("1e3") == 1000


@pytest.mark.parametrize("text", ["", "lots", "1 Gi", " 1Gi", "1GB", "Gi", "1e", "1.5.1", "Infinity", "1ki", "--1"])
def test_what_the_api_server_refuses_is_refused(text):
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        parse_quantity(text)


def test_a_number_that_is_not_text_is_refused():
    with pytest.raises(ValueError):
        parse_quantity(5)  # type: ignore[arg-type]
