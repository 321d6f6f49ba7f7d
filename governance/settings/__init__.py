"""Django settings for GPU-hour budget governance (``DJANGO_SETTINGS_MODULE=governance.settings``).

Every value comes from the environment, parsed strictly, with defaults that are safe for a
developer's machine (SQLite under ``var/``, Celery tasks run in-process, e-mail to the console).
A production deployment sets ``DEBUG=false``, ``SECRET_KEY``, ``ALLOWED_HOSTS``,
``DATABASE_URL`` and ``CELERY_BROKER_URL``; with ``DEBUG=false`` the app refuses to start on
the development secret key.

One module per subject, each importing the ones it reads from: ``environment``
(how values are read), ``core`` (the site, its database and static files), ``accounts``
(signing in), ``mail``, ``security`` (HTTPS, headers, CSP), ``api`` and ``background``
(Celery, the live loop, the periodic tasks).
"""

# Django reads every upper-case name of this module: each subject module's settings are
# gathered here whole, so a setting added to one of them needs no second line here.
from governance.settings.accounts import *  # noqa: F403
from governance.settings.api import *  # noqa: F403
from governance.settings.background import *  # noqa: F403
from governance.settings.core import *  # noqa: F403
from governance.settings.environment import *  # noqa: F403
from governance.settings.mail import *  # noqa: F403
from governance.settings.security import *  # noqa: F403
