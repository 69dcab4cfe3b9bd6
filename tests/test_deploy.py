"""The deployment guide and what the tests run agree: docs/deployment.md's nginx block is
deploy/nginx.conf.template."""

from testkit.proxy import TEMPLATE, render_site
from tests.conftest import ROOT


def test_the_deployment_guide_gives_the_nginx_configuration_the_proxy_test_runs():
    guide = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert f"```nginx\n{TEMPLATE.read_text(encoding='utf-8')}```" in guide


def test_every_placeholder_is_filled():
    site = render_site("127.0.0.1:8443", "pal.lab.example", ROOT / "c.pem", ROOT / "k.pem", "127.0.0.1:8501")
    assert "@" not in "".join(line.split("#")[0] for line in site.splitlines())
    assert "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;" in site
