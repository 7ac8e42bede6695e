module example.com/pgsearchclient

go 1.19
