"""Whose address a request is: X-Forwarded-For only from a trusted proxy, and only the hop it added."""

from review.clients import client_address, over_tls, trusted_proxies

ONE = {"PAL_TRUST_PROXY": "1"}


def test_without_trust_the_peer_is_the_address_whatever_the_headers_say():
    assert client_address("203.0.113.5", "10.9.9.9", env={}) == "203.0.113.5"
    assert client_address("127.0.0.1", "10.9.9.9", env={"PAL_TRUST_PROXY": "0"}) == "127.0.0.1"
    assert client_address(None, None, env={}) is None


def test_a_trusted_proxy_is_believed_only_for_the_hop_it_added():
    """Audit finding 10: the first X-Forwarded-For hop was taken, which a visitor writes themselves when the proxy
    appends (``$proxy_add_x_forwarded_for``) — each guess could claim a new address and dodge the throttle."""
    assert client_address("127.0.0.1", "1.2.3.4, 198.51.100.7", env=ONE) == "198.51.100.7"
    assert client_address("127.0.0.1", "198.51.100.7", env=ONE) == "198.51.100.7"
    assert client_address("::ffff:127.0.0.1", " 198.51.100.7 ", env=ONE) == "198.51.100.7"
    assert client_address("127.0.0.1", "", env=ONE) == "127.0.0.1"


def test_a_request_reaching_the_app_directly_cannot_claim_an_address():
    assert client_address("203.0.113.5", "127.0.0.1", env=ONE) == "203.0.113.5"
    listed = {"PAL_TRUST_PROXY": "10.0.0.5, 10.0.0.6"}
    assert trusted_proxies(listed) == {"10.0.0.5", "10.0.0.6"}
    assert client_address("10.0.0.6", "9.9.9.9, 198.51.100.2", env=listed) == "198.51.100.2"
    assert client_address("127.0.0.1", "198.51.100.2", env=listed) == "127.0.0.1"


def test_tls_as_the_visitor_sees_it():
    assert over_tls("https", "203.0.113.5", None, env={})
    assert not over_tls("http", "203.0.113.5", "https", env={})  # a visitor's own header means nothing
    assert over_tls("http", "127.0.0.1", "https", env=ONE)
    assert not over_tls("http", "127.0.0.1", "https, http", env=ONE)
