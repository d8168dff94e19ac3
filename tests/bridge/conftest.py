"""The bridge's tests, in folders that mirror `pymc_resume/bridge/`. Their shared helpers live
here, beside this file: `live_steps` (steps against live adapters) and `bridge_test_adapters`
(small adapters with one fault each). pytest puts the folder of every conftest.py on sys.path,
so tests in the subfolders import the helpers by name, as the tests here do."""
