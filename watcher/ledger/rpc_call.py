"""What the RpcClient's method mixins (``rpc_accounts``, ``rpc_das``) stand on: one ``call``,
given by the class they are mixed into (the client, or a reader pinned to one endpoint), and
the commitment their calls ask for."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter

T = TypeVar("T")


class OverCall:
    commitment: str

    async def call(
        self, method: str, params: list[Any] | None, model: type[T] | TypeAdapter[T]
    ) -> T:
        raise NotImplementedError
