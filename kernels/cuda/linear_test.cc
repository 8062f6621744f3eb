// Scaffold: replaced by the tests.
