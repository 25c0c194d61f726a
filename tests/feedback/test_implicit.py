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
