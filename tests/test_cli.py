from typer.testing import CliRunner

from multihop.cli import app
from multihop.evaluation import evaluate

from test_evaluation import Echo, make_examples

runner = CliRunner()


def test_trace_show_lists_questions_and_shows_one(tmp_path):
    evaluate(Echo(), make_examples(2), tmp_path, progress=False)
    listing = runner.invoke(app, ["trace", "show", str(tmp_path)])
    assert listing.exit_code == 0 and "q0" in listing.output and "q1" in listing.output
    one = runner.invoke(app, ["trace", "show", str(tmp_path), "--id", "q1"])
    assert one.exit_code == 0 and "prediction" in one.output
    missing = runner.invoke(app, ["trace", "show", str(tmp_path), "--id", "nope"])
    assert missing.exit_code != 0


def test_models_list_shows_the_registry():
    result = runner.invoke(app, ["models", "list"])
    assert result.exit_code == 0 and "minilm" in result.output and "smollm2" in result.output


def test_data_fetch_offline_fails_clearly(tmp_path, monkeypatch):
    import multihop.fetch as fetch

    def offline(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(fetch.urllib.request, "urlopen", offline)
    result = runner.invoke(app, ["data", "fetch", "hotpotqa", "--root", str(tmp_path)])
    assert result.exit_code == 1 and "offline" in result.output
    assert not list(tmp_path.rglob("*.json"))  # nothing half-written is left behind


def test_data_list_without_data_says_where_to_point(monkeypatch):
    monkeypatch.delenv("MULTIHOP_DATA", raising=False)
    result = runner.invoke(app, ["data", "list"])
    assert result.exit_code == 1 and "MULTIHOP_DATA" in result.output
