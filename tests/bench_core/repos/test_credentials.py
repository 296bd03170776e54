"""A repository URL with a password in it: git gets it, nothing stored or printed keeps it."""

from failatlas.bench_core.repos.git import GitFailed
from failatlas.bench_core.repos.urls import without_credentials


def test_passwords_in_urls_are_replaced_wherever_text_is_kept():
    text = "asking https://alice:s3cretPASS@example.org/r.git for HEAD; also ssh://bob@host/x"
    kept = without_credentials(text)
    assert "s3cretPASS" not in kept and "alice" not in kept and "bob@" not in kept
    assert "https://***@example.org/r.git" in kept
    failed = GitFailed("asking http://u:pw@127.0.0.1:1/r.git for HEAD", "fatal: unable to access 'http://u:pw@127.0.0.1:1/r.git/'")
    assert "pw@" not in str(failed) and "pw@" not in failed.reason
