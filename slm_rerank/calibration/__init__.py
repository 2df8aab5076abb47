"""Measuring the judge on the user's own code (issue 18): cases mined from the repository's
history (``mining``), the tree each was asked in (``trees``), the orders and their metrics
(``measure``), and the judge weight a search then uses (``weights``)."""
