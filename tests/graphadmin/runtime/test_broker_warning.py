"""A production configuration (DEBUG off) on the filesystem broker is warned about loudly: a system check."""

from graphadmin.runtime import checks


def test_filesystem_broker_with_debug_off_is_a_warning(settings):
    settings.DEBUG, settings.CELERY_BROKER_URL = False, "filesystem://"
    (warning,) = checks.check_broker()
    assert warning.id == "graphadmin.W001" and "filesystem" in warning.msg and "CELERY_BROKER_URL" in warning.hint


def test_redis_or_debug_is_quiet(settings):
    settings.DEBUG, settings.CELERY_BROKER_URL = False, "redis://127.0.0.1:6379/0"
    assert checks.check_broker() == []
    settings.DEBUG, settings.CELERY_BROKER_URL = True, "filesystem://"
    assert checks.check_broker() == []
