"""What the docs say about Alembic and file databases holds.

* The examples that keep their rows in a file (getting started, the order
  number column, the column types, the migration's worked example) run
  again in the same folder, as a reader would.
* The render of ``FormattedOrderNumber`` quoted in docs/order_numbers.md is
  what autogenerate writes.
* The ``env.py`` made by ``sqla-ids alembic init`` (docs/alembic.md) gives a
  new numbered table's sequence its create/drop operations.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate.api import AutogenContext
from alembic.config import Config
from alembic.migration import MigrationContext

from sqla_ids import FormattedOrderNumber
from sqla_ids.alembic import render_item
from sqla_ids.cli import main

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _run_page(page: Path, namespace: dict[str, object]) -> None:
    for number, block in enumerate(_BLOCK.findall(page.read_text(encoding="utf-8")), 1):
        if block.startswith("# doctest: skip"):
            continue
        code = compile(block, f"{page.name} (example {number})", "exec", dont_inherit=True)
        exec(code, namespace)


@pytest.mark.parametrize(
    "name", ["index.md", "order_numbers.md", "alembic.md", "types.md", "migration.md"]
)
def test_page_examples_run_twice_in_the_same_folder(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # file databases are created here and kept
    for run in (1, 2):
        _run_page(ROOT / "docs" / name, {"__name__": f"docs_{Path(name).stem}_{run}"})


def test_documented_order_number_render_is_what_autogenerate_writes() -> None:
    context = AutogenContext(MigrationContext.configure(dialect_name="postgresql"))
    rendered = render_item(
        "type", FormattedOrderNumber("shop", sequence="orders_number_seq"), context
    )
    assert rendered == "sqla_ids.FormattedOrderNumber(key='shop', sequence='orders_number_seq')"
    assert context.imports == {"import sqla_ids"}
    page = (ROOT / "docs" / "order_numbers.md").read_text(encoding="utf-8")
    assert f"```text\n{rendered}\n```" in page
    assert "sqla_ids.types.order_number.FormattedOrderNumber" not in page


def test_template_env_renders_the_sequence_operations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["alembic", "init", "migrations", "--url", "sqlite:///shop.sqlite3"]) == 0
    (tmp_path / "shop_models.py").write_text(
        textwrap.dedent(
            """
            import sqlalchemy as sa

            from sqla_ids import FormattedOrderNumber, UUIDv7

            metadata = sa.MetaData()
            sa.Table(
                "orders",
                metadata,
                sa.Column("id", UUIDv7(), primary_key=True),
                sa.Column("number", FormattedOrderNumber("shop", sequence="orders_number_seq")),
            )
            """
        )
    )
    env = tmp_path / "migrations" / "env.py"
    env.write_text(
        env.read_text().replace(
            "target_metadata = None",
            f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\n"
            "from shop_models import metadata as target_metadata",
        )
    )
    config = Config(str(tmp_path / "alembic.ini"))
    command.revision(config, message="orders", autogenerate=True, rev_id="0001")
    script = next((tmp_path / "migrations" / "versions").glob("0001_*.py")).read_text()
    assert "import sqla_ids\n" in script
    assert "sqla_ids.FormattedOrderNumber(key='shop', sequence='orders_number_seq')" in script
    upgrade, downgrade = script.split("def downgrade")
    owner = "table='orders', column='number'"
    assert upgrade.index(
        f"op.create_order_number_sequence('orders_number_seq', {owner})"
    ) < upgrade.index("op.create_table('orders'")
    assert downgrade.index("op.drop_table('orders')") < downgrade.index(
        f"op.drop_order_number_sequence('orders_number_seq', {owner})"
    )
    command.upgrade(config, "head")
    command.check(config)
    command.downgrade(config, "base")
    engine = sa.create_engine("sqlite:///shop.sqlite3")
    with engine.connect() as connection:
        assert not sa.inspect(connection).has_table("orders")
        assert not sa.inspect(connection).has_table("sqla_ids_counters")  # its only row went
    engine.dispose()
