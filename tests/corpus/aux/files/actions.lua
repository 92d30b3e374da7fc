-- loaded by the "lua" place of the uses corpus: one of each kind of Lua extension the
-- configuration can name with the lua. prefix (action, service, fetch, converter)
core.register_action("tag", { "http-req", "http-res", "tcp-req", "tcp-res" }, function(txn) end)
core.register_action("label", { "http-req" }, function(txn, name) end, 1)
core.register_service("hello", "http", function(applet) end)
core.register_service("echo", "tcp", function(applet) end)
core.register_fetches("answer", function(txn) return 42 end)
core.register_converters("twice", function(value) return value .. value end)
