"""The bounds awa checks numbers against before they reach PostgreSQL or the calendar, so an
input past them is refused with a message naming it instead of failing in the database."""

from __future__ import annotations

from typing import Final

# Job ids and run leases are PostgreSQL bigint.
MAX_ID: Final = 2**63 - 1
# Row limits are cast to PostgreSQL integer.
MAX_LIMIT: Final = 2**31 - 1
# The longest wait, delay or age accepted: 100 years is beyond any real use, and now plus that
# stays inside Python's datetime (year 9999), where 1e12 seconds would not.
MAX_SECONDS: Final = 100 * 365 * 86_400
