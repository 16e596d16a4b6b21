"""Drop-in SQLAlchemy engine: ``create_engine("mysql+consistent://…")``.

::

    engine = create_engine(
        "mysql+consistent://app:pw@db1:3306/shop?replica=db2:3306&replica=db3:3306"
        "&level=read_own_writes&wait_timeout=0.5&on_timeout=primary"
    )
    with Session(engine) as session:
        session.add(Order(item="book"))
        session.commit()
        session.scalars(select(Order)).all()     # on a replica that has the insert
        cookie = consistent.sqlalchemy.token(session)

    # next request, maybe another process
    with Session(engine) as session:
        consistent.sqlalchemy.require(session, cookie)
        ...

The same with asyncio (``consistent.aio`` underneath)::

    engine = create_async_engine("mysql+consistent_async://app:pw@db1:3306/shop?replica=db2:3306")
    async with AsyncSession(engine) as session:
        ...
        cookie = consistent.sqlalchemy.token(session)

The dialect is :class:`ConsistentDialect` (entry point ``mysql.consistent``, and
``mariadb.consistent`` for :class:`ConsistentMariaDBDialect`); the asyncio one is
:class:`~consistent.sqlalchemy.async_dialect.ConsistentAsyncDialect` (``mysql.consistent_async``
and ``mariadb.consistent_async``, in :mod:`consistent.sqlalchemy.async_dialect`, imported only
by its entry point).  How the token follows sessions is in :mod:`consistent.sqlalchemy.tracking`,
the URL options in :mod:`consistent.sqlalchemy.url`.
"""

from __future__ import annotations

from consistent.sqlalchemy.dialect import ConsistentDialect, ConsistentMariaDBDialect
from consistent.sqlalchemy.tracking import TOKEN_KEY, require, token

__all__ = ["TOKEN_KEY", "ConsistentDialect", "ConsistentMariaDBDialect", "require", "token"]

#: SQLAlchemy looks for ``dialect`` when a module is registered without a class name.
dialect = ConsistentDialect
