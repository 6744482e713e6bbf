"""Three posts for near-duplicate tests: one people saw, a rewording of it, and fresh news."""

from __future__ import annotations

SEEN = (
    "This week the team shipped dark mode for the web app, closed 14 bugs reported by "
    "customers, and welcomed Priya to the design team. Next week we start work on offline "
    "sync. Thanks to everyone who sent feedback on the beta!"
)
REWORDED = (
    "Dark mode for the web app is now live, shipped by the team this week along with fixes "
    "for 14 customer-reported bugs. We also welcomed Priya, who joins the design team. Up "
    "next week: offline sync. Thank you to everyone who gave feedback on the beta!"
)
FRESH = (
    "Our support team now answers in Portuguese and Spanish, and the new status page shows "
    "every incident within five minutes. Next week: the quarterly planning session."
)
