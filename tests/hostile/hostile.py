"""What the hostile suite's tests share: the questions of its data folder and the one-line check of a failure."""

QUESTIONS = [{"id": f"q{i}", "question": f"Which city is number {i}?", "answers": ["Paris"],
              "paragraphs": [{"title": "Paris", "text": f"Paris is city number {i}.", "is_supporting": True},
                             {"title": "Berlin", "text": "Berlin is a city.", "is_supporting": False}]}
             for i in range(3)]


def one_line(error: list[str]) -> str:
    """The one ``error:`` line a failing command prints (the LM's progress output aside), no traceback."""
    assert not any("Traceback" in line for line in error), error
    errors = [line for line in error if line.startswith("error: ")]
    assert len(errors) == 1, error
    return errors[0]
