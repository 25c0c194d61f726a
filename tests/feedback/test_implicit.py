"""The implicit-use rule (pure, no database): overlap of distinctive word n-grams with the response."""

from feedback.rules import detect_implicit, distinctive_grams

CANDIDATES = [
    {"node_id": 1, "title": "Postgres vacuum tuning", "text": "Autovacuum scale factor lowered for hot tables."},
    {"node_id": 2, "title": "Kafka retention", "text": "Topic retention set to seven days for audit streams."},
    {"node_id": 3, "title": "Postgres", "text": "Postgres."},  # too little distinctive text to decide
]


def test_grams_drop_stopwords_and_keep_adjacent_bigrams():
    assert distinctive_grams("The vacuum of hot tables") == {"vacuum", "hot", "tables", "hot tables"}


def test_used_item_is_detected_and_unrelated_is_not():
    reply = "I lowered the autovacuum scale factor on hot tables, per the Postgres vacuum tuning note."
    used = detect_implicit(CANDIDATES, reply, threshold=0.35)
    assert [u["node_id"] for u in used] == [1]
    assert used[0]["share"] >= 0.35


def test_threshold_decides():
    reply = "The vacuum tuning matters."  # vacuum, tuning, "vacuum tuning": 3 of node 1's grams
    own = len({g for g in distinctive_grams(CANDIDATES[0]["title"] + " " + CANDIDATES[0]["text"])} - {"postgres"})
    assert detect_implicit(CANDIDATES, reply, threshold=3 / own) != []
    assert detect_implicit(CANDIDATES, reply, threshold=3 / own + 0.01) == []


def test_shared_words_prove_nothing():
    # "postgres" is in node 1 and node 3, so it is not distinctive of either.
    assert detect_implicit(CANDIDATES, "postgres postgres postgres", threshold=0.05) == []


def test_a_quoted_sentence_of_a_long_note_is_a_use():
    long_note = {
        "node_id": 4,
        "title": "D13-1",
        "text": "Jon (8:29 pm on 13 June, 2023): Hey Gina, thanks for being there for me and believing in me. "
        "The dance studio opening went better than expected, with forty students signed up already. "
        "Next month we start evening classes for beginners and a weekend workshop on choreography. "
        "Gina promised to bring her friends from the clothing store to the first class on Saturday.",
    }
    quote = "The dance studio opening went better than expected, with forty students signed up already."
    own = distinctive_grams(long_note["title"] + " " + long_note["text"])
    assert len(own & distinctive_grams(quote)) / len(own) < 0.35  # the note-wide share alone would miss it
    used = detect_implicit([*CANDIDATES, long_note], quote, threshold=0.35)
    assert [u["node_id"] for u in used] == [4]
    assert used[0]["share"] == 1.0
    # A few words of the sentence are not a quote.
    assert detect_implicit([*CANDIDATES, long_note], "The studio opening was nice.", threshold=0.35) == []
