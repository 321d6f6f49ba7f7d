"""Signing in: django-allauth, optional OpenID Connect, password rules, throttling of failed
sign-ins and the cache that counts them."""

from __future__ import annotations

from governance.settings.environment import env_bool, env_str

# --- Authentication (django-allauth) ----------------------------------------------------
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "username*", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = env_str("ACCOUNT_EMAIL_VERIFICATION", "none")
ACCOUNT_ALLOW_REGISTRATION = env_bool("ACCOUNT_ALLOW_REGISTRATION", False)
ACCOUNT_ADAPTER = "governance.auth_adapter.AccountAdapter"
ACCOUNT_LOGOUT_ON_GET = False
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "home"
ACCOUNT_LOGOUT_REDIRECT_URL = "account_login"

# Optional OpenID Connect sign-in, configured entirely from the environment.
SOCIALACCOUNT_PROVIDERS: dict = {}
if env_str("OIDC_SERVER_URL"):
    SOCIALACCOUNT_PROVIDERS["openid_connect"] = {
        "APPS": [
            {
                "provider_id": env_str("OIDC_PROVIDER_ID", "sso"),
                "name": env_str("OIDC_PROVIDER_NAME", "Single sign-on"),
                "client_id": env_str("OIDC_CLIENT_ID"),
                "secret": env_str("OIDC_CLIENT_SECRET"),
                "settings": {"server_url": env_str("OIDC_SERVER_URL")},
            }
        ]
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Sign-in throttling (django-allauth) ------------------------------------------------------
# After 5 failed sign-ins for one account within 5 minutes (or 10 a minute from one address)
# allauth refuses further attempts, the right password included, until the window passes.
# The counts live in the cache: set CACHE_URL (redis://...) when several processes serve the
# site, or each process counts on its own.
ACCOUNT_RATE_LIMITS = {
    "login_failed": env_str("ACCOUNT_LOGIN_FAILED_RATE_LIMIT", "10/m/ip,5/5m/key"),
}
CACHE_URL = env_str("CACHE_URL")
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
