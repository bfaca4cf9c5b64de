// Package testutil holds helpers for tests in any hpp module: skipping
// root-only tests with a reason, and real filesystems to run node tests on
// (tmpfs, XFS on a loop device) that are torn down even when a test fails
// midway.
package testutil
