from watcher.service.target_pipeline import LastErrors


def test_the_last_failure_of_a_source_is_the_one_named() -> None:
    errors = LastErrors()
    assert errors.last("votes") is None
    errors.failed("votes", "RpcError: timed out")
    errors.failed("votes", "DoubtfulAnswer: not evidence: stale slot")
    errors.failed("balance", "RpcError: 429")
    assert errors.last("votes") == "DoubtfulAnswer: not evidence: stale slot"
    assert errors.last("balance") == "RpcError: 429"
    assert errors.last("supply") is None
