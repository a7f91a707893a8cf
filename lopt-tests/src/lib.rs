//! Shared helpers of the differential tests.
