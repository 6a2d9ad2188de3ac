"""Pure logic shared by every component: vendor table, device inventory, quantities, naming, CEL, conversion.

Nothing in this package does I/O beyond reading the data files shipped next to it; it imports
nothing from the rest of dralab except ``dralab.errors``.

Modules, one job each:

- :mod:`.convert`: HAMi-syntax pods to DRA pods and the claims they need; :mod:`.volcano`: the same
  for Volcano Jobs; :mod:`.denials`: the one error conversion raises.
- :mod:`.vendors`: the vendor table; :mod:`.hami_config`: HAMi's device config translated into it;
  :mod:`.hami_units`: HAMi's request values read as HAMi reads them.
- :mod:`.inventory`: the fake devices of a cluster; :mod:`.objects`: cluster-scoped objects (DeviceClasses).
- :mod:`.accounting`: what allocated claims consume of each device; :mod:`.podclaims`: which claims a
  pod uses; :mod:`.budget`: team budgets over claims.
- :mod:`.quantity`: Kubernetes quantities, exactly; :mod:`.naming`: valid object names;
  :mod:`.cel`: CEL selectors; :mod:`.enforcement`: what a container is given for enforcement;
  :mod:`.jsonpatch`: RFC 6902 patches.
"""
