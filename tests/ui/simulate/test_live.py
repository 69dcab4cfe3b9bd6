"""What a turn shows while it is written (ui/simulate/live.py: TurnStream)."""

from __future__ import annotations

from ui.simulate.live import TurnStream


class Placeholder:
    """Keeps what ``st.empty().markdown`` would draw."""

    def __init__(self) -> None:
        self.drawn: list[str] = []

    def markdown(self, text: str) -> None:
        self.drawn.append(text)


def test_the_memory_search_shows_first_then_the_reply_grows_below_it():
    spot = Placeholder()
    stream = TurnStream(spot, "**assistant** · Requirement Prediction")
    stream.query("staff ")
    assert "searching memory for:* staff ▌" in spot.drawn[-1] and spot.drawn[-1].startswith("**assistant**")
    stream.query("staff shortage.")
    stream.query("staff shortage")  # the query retrieval used comes last and replaces what streamed
    stream.reply("It sounds")
    stream.reply(" like *Q2*")
    last = spot.drawn[-1].split("  \n")
    assert last[1].endswith("for:* staff shortage")  # the cursor has moved to the reply
    assert last[2] == "It sounds like \\*Q2\\* ▌"  # the model's markdown is shown as text


def test_a_turn_without_a_memory_search_shows_only_its_reply():
    spot = Placeholder()
    stream = TurnStream(spot, "**user**")
    stream.reply("Hi")
    assert spot.drawn == ["**user**  \nHi ▌"]
