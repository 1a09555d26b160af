"""The provider implementations, one module per API (``registry.BUILTIN_PROVIDER_MODULES``).

Importing this package defers the SDKs' type indexes (:mod:`._lazy_index`): a provider module
then imports its SDK without building the hundreds of model classes it never uses.
"""

from ._lazy_index import defer_indexes

defer_indexes()
