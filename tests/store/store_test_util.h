// Test helpers for tests/store: a test's scratch folder (tests/support/temp_dir.h).
#pragma once
#include "tests/support/temp_dir.h"

using tessera::test_support::TempDir;
