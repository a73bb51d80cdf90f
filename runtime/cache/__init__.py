"""Informer caches on raw watch streams: list, watch, store, fan out.

informer = Informer(transport, Resource("batch", "v1", "jobs"), clock=clock,
                    indexers={"by-owner": owner_uid_index})
informer.add_handler(lambda old, new: queue.add(object_key(new or old)))
async with informer:
    await informer.wait_synced()
    informer.store.by_index("by-owner", uid)
"""

from runtime.cache.informer import Handler, Informer
from runtime.cache.listing import Listed, list_all
from runtime.cache.reflector import Delta, Selection, reflect
from runtime.cache.resource import Obj, Resource, object_key, resource_version
from runtime.cache.store import (
    Change,
    IndexFunc,
    Store,
    interned,
    label_index,
    owner_uid_index,
    strip,
)
from runtime.cache.watchstream import Bookmark, SilentStream, Watched, watch_once

__all__ = [
    "Bookmark",
    "Change",
    "Delta",
    "Handler",
    "IndexFunc",
    "Informer",
    "Listed",
    "Obj",
    "Resource",
    "Selection",
    "SilentStream",
    "Store",
    "Watched",
    "interned",
    "label_index",
    "list_all",
    "object_key",
    "owner_uid_index",
    "reflect",
    "resource_version",
    "strip",
    "watch_once",
]
