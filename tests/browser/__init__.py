"""Tests in a real browser (headless Chromium through Playwright)."""
