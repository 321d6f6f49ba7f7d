"""File exports of the finance usage report (CSV and XLSX writers over ``UsageReport``)."""
