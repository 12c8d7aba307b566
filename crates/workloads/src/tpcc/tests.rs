//! TPC-C's logic against hand-worked small cases, its consistency checks
//! against deliberately broken databases, and a short driven run.

use std::sync::Arc;

use flashlab_engine::row::Value;
use flashlab_engine::{Database, DbConfig, Devices};
use flashlab_runtime::{NS_PER_S, Sim, SimConfig};

use super::schema::{
    C_BALANCE, C_CREDIT, C_DATA, C_DELIVERY_CNT, C_DISCOUNT, C_FIRST, C_ID, C_LAST, C_PAYMENT_CNT,
    C_YTD_PAYMENT, CUSTOMER, D_NEXT_O_ID, D_TAX, D_YTD, DISTRICT, H_AMOUNT, HISTORY, I_PRICE, ITEM,
    NEW_ORDER, O_C_ID, O_CARRIER_ID, O_OL_CNT, OL_AMOUNT, OL_DELIVERY_D, OL_I_ID, ORDER,
    ORDER_LINE, S_DIST_01, S_ORDER_CNT, S_QUANTITY, S_REMOTE_CNT, S_YTD, STOCK, Tables, W_TAX,
    W_YTD, WAREHOUSE, dec, i, int, text,
};
use super::txn::*;
use super::*;
use crate::Workload;

/// A small population: 2 warehouses, 200 items, 30 customers per district.
fn small() -> TpccOptions {
    TpccOptions {
        warehouses: 2,
        items: 200,
        customers_per_district: 30,
        ..TpccOptions::default()
    }
}

/// Load `options` into a fresh simulated database and run `f` on it.
fn with_db<T: Send + 'static>(
    options: TpccOptions,
    f: impl FnOnce(&Database, &TpcC) -> T + Send + 'static,
) -> T {
    Sim::run(SimConfig::default(), move |_| {
        let config = DbConfig::simple("memory", "memory", 8192, 64 << 20);
        let devices = Devices::from_presets(&config).expect("devices");
        let db = Database::open_with(&config, devices).expect("open");
        let tpcc = TpcC::new(options);
        tpcc.setup(&db).expect("load");
        f(&db, &tpcc)
    })
    .expect("simulation")
    .0
    .finished()
    .expect("finished")
}

/// Drive `workload` on `db` with `clients` clients for `duration_ns` after
/// `warmup_ns` of warm-up, reporting no progress.
fn drive(
    db: &Database,
    workload: &Arc<dyn Workload>,
    clients: u32,
    duration_ns: u64,
    warmup_ns: u64,
) -> crate::driver::RunResult {
    let config = crate::driver::RunConfig {
        clients,
        duration_ns,
        warmup_ns,
        progress_interval_ns: 0,
    };
    crate::driver::run(db, workload.clone(), &config, |_| {}).unwrap()
}

fn get(db: &Database, table: &str, key: &[Value]) -> Option<Vec<Value>> {
    let t = db.table(table).unwrap();
    let mut txn = db.begin().unwrap();
    let row = txn.get_row(&t, key).unwrap();
    txn.commit().unwrap();
    row
}

fn count(db: &Database, table: &str) -> usize {
    let t = db.table(table).unwrap();
    let mut txn = db.begin().unwrap();
    let n = txn
        .scan(&t, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .unwrap()
        .len();
    txn.commit().unwrap();
    n
}

fn change(db: &Database, table: &str, key: &[Value], f: impl FnOnce(&mut Vec<Value>)) {
    let t = db.table(table).unwrap();
    let mut txn = db.begin().unwrap();
    txn.update_row(&t, key, f).unwrap().expect("row");
    txn.commit().unwrap();
}

fn delete(db: &Database, table: &str, key: &[Value]) {
    let t = db.table(table).unwrap();
    let mut txn = db.begin().unwrap();
    assert!(txn.delete_row(&t, key).unwrap());
    txn.commit().unwrap();
}

#[test]
fn population_follows_the_rules_and_is_consistent() {
    with_db(small(), |db, tpcc| {
        assert_eq!(count(db, ITEM), 200);
        assert_eq!(count(db, WAREHOUSE), 2);
        assert_eq!(count(db, DISTRICT), 20);
        assert_eq!(count(db, STOCK), 400);
        assert_eq!(count(db, CUSTOMER), 600);
        assert_eq!(count(db, HISTORY), 600);
        assert_eq!(count(db, ORDER), 600);
        // 900 of 3,000 are new orders: 9 of 30.
        assert_eq!(count(db, NEW_ORDER), 2 * 10 * 9);
        let lines = count(db, ORDER_LINE);
        assert!((600 * 5..=600 * 15).contains(&lines), "{lines}");
        let d = get(db, DISTRICT, &[i(1), i(1)]).unwrap();
        assert_eq!(int(&d, D_NEXT_O_ID), 31);
        assert_eq!(dec(&d, D_YTD), 3_000_000);
        // The first (here: all) customers take last names in order.
        let c = get(db, CUSTOMER, &[i(1), i(1), i(3)]).unwrap();
        assert_eq!(text(&c, C_LAST), "BARBARABLE");
        // Undelivered orders: no carrier, lines without delivery date.
        let o = get(db, ORDER, &[i(1), i(1), i(22)]).unwrap();
        assert_eq!(int(&o, O_CARRIER_ID), 0);
        let o = get(db, ORDER, &[i(1), i(1), i(21)]).unwrap();
        assert!((1..=10).contains(&int(&o, O_CARRIER_ID)));
        assert_eq!(tpcc.check(db, 0).unwrap(), Ok(()));
    });
}

#[test]
fn population_is_deterministic_by_seed() {
    let rows = |seed: u64| {
        with_db(TpccOptions { seed, ..small() }, |db, _| {
            (
                get(db, CUSTOMER, &[i(2), i(7), i(19)]),
                get(db, STOCK, &[i(1), i(150)]),
                get(db, ORDER_LINE, &[i(2), i(3), i(25), i(1)]),
            )
        })
    };
    assert_eq!(rows(5), rows(5));
    assert_ne!(rows(5), rows(6));
}

#[test]
fn total_is_sum_less_discount_plus_taxes() {
    // 100.00 less 10% plus 15% taxes: 103.50.
    assert_eq!(txn::total(10_000, 1_000, 1_500), 10_350);
    assert_eq!(txn::total(0, 0, 0), 0);
    // 12.34 x 0.95 x 1.1234 = 13.16913... -> 13.17
    assert_eq!(txn::total(1_234, 500, 1_234), 1_317);
}

#[test]
fn stock_update_restocks_under_the_margin() {
    let mut row = schema::stock()
        .columns()
        .iter()
        .map(|_| i(0))
        .collect::<Vec<_>>();
    row[S_QUANTITY] = i(20);
    take_stock(&mut row, 5, false);
    assert_eq!(int(&row, S_QUANTITY), 15, "20 >= 5 + 10: plain decrement");
    take_stock(&mut row, 6, true);
    assert_eq!(int(&row, S_QUANTITY), 15 - 6 + 91, "15 < 16: restocked");
    assert_eq!(
        (
            int(&row, S_YTD),
            int(&row, S_ORDER_CNT),
            int(&row, S_REMOTE_CNT)
        ),
        (11, 2, 1)
    );
}

#[test]
fn new_order_hand_worked() {
    with_db(small(), |db, _| {
        let t = Tables::open(db).unwrap();
        let s1 = get(db, STOCK, &[i(1), i(1)]).unwrap();
        let s2 = get(db, STOCK, &[i(2), i(2)]).unwrap();
        let p1 = dec(&get(db, ITEM, &[i(1)]).unwrap(), I_PRICE);
        let p2 = dec(&get(db, ITEM, &[i(2)]).unwrap(), I_PRICE);
        let input = NewOrderInput {
            w_id: 1,
            d_id: 1,
            c_id: 4,
            lines: vec![
                OrderLineInput {
                    i_id: 1,
                    supply_w_id: 1,
                    quantity: 3,
                },
                OrderLineInput {
                    i_id: 2,
                    supply_w_id: 2,
                    quantity: 10,
                },
            ],
        };
        let outcome = new_order(db, &t, &input).unwrap();
        let w = get(db, WAREHOUSE, &[i(1)]).unwrap();
        let d = get(db, DISTRICT, &[i(1), i(1)]).unwrap();
        let c = get(db, CUSTOMER, &[i(1), i(1), i(4)]).unwrap();
        let sum = 3 * p1 + 10 * p2;
        let expect = txn::total(sum, dec(&c, C_DISCOUNT), dec(&w, W_TAX) + dec(&d, D_TAX));
        assert_eq!(
            outcome,
            NewOrderOutcome::Committed {
                o_id: 31,
                total_cents: expect
            }
        );
        assert_eq!(int(&d, D_NEXT_O_ID), 32);
        let o = get(db, ORDER, &[i(1), i(1), i(31)]).unwrap();
        assert_eq!((int(&o, O_C_ID), int(&o, O_OL_CNT), int(&o, 7)), (4, 2, 0));
        assert!(get(db, NEW_ORDER, &[i(1), i(1), i(31)]).is_some());
        let l2 = get(db, ORDER_LINE, &[i(1), i(1), i(31), i(2)]).unwrap();
        assert_eq!((int(&l2, OL_I_ID), dec(&l2, OL_AMOUNT)), (2, 10 * p2));
        assert_eq!(int(&l2, OL_DELIVERY_D), 0);
        let after = |s: &Vec<Value>, q: i64| {
            let had = int(s, S_QUANTITY);
            if had >= q + 10 { had - q } else { had - q + 91 }
        };
        let n1 = get(db, STOCK, &[i(1), i(1)]).unwrap();
        let n2 = get(db, STOCK, &[i(2), i(2)]).unwrap();
        assert_eq!(int(&n1, S_QUANTITY), after(&s1, 3));
        assert_eq!(int(&n2, S_QUANTITY), after(&s2, 10));
        assert_eq!((int(&n1, S_REMOTE_CNT), int(&n2, S_REMOTE_CNT)), (0, 1));
        // The dist info of the customer's district comes from the stock row.
        assert_eq!(text(&l2, 9), text(&s2, S_DIST_01));
    });
}

#[test]
fn new_order_with_an_unused_item_rolls_back() {
    with_db(small(), |db, tpcc| {
        let t = Tables::open(db).unwrap();
        let before = get(db, STOCK, &[i(1), i(5)]).unwrap();
        let input = NewOrderInput {
            w_id: 1,
            d_id: 2,
            c_id: 1,
            lines: vec![
                OrderLineInput {
                    i_id: 5,
                    supply_w_id: 1,
                    quantity: 4,
                },
                OrderLineInput {
                    i_id: 201,
                    supply_w_id: 1,
                    quantity: 1,
                },
            ],
        };
        assert_eq!(
            new_order(db, &t, &input).unwrap(),
            NewOrderOutcome::RolledBack
        );
        assert_eq!(
            int(&get(db, DISTRICT, &[i(1), i(2)]).unwrap(), D_NEXT_O_ID),
            31
        );
        assert!(get(db, ORDER, &[i(1), i(2), i(31)]).is_none());
        assert_eq!(get(db, STOCK, &[i(1), i(5)]).unwrap(), before);
        assert_eq!(tpcc.check(db, 0).unwrap(), Ok(()));
    });
}

/// Three customers of (1, 1) named TESTNAME with first names Carol (101),
/// Alice (102), Bob (103): sorted by first name, n = 3, position ceil(3/2)
/// = 2 is Bob.
fn add_namesakes(db: &Database) {
    let t = db.table(CUSTOMER).unwrap();
    let template = get(db, CUSTOMER, &[i(1), i(1), i(1)]).unwrap();
    let mut txn = db.begin().unwrap();
    for (c, first) in [(101, "Carol"), (102, "Alice"), (103, "Bob")] {
        let mut row = template.clone();
        row[C_ID] = i(c);
        row[C_FIRST] = Value::Str(first.into());
        row[C_LAST] = Value::Str("TESTNAME".into());
        txn.put_row(&t, &row).unwrap();
    }
    txn.commit().unwrap();
}

#[test]
fn payment_by_last_name_pays_the_middle_customer() {
    with_db(small(), |db, tpcc| {
        add_namesakes(db);
        let t = Tables::open(db).unwrap();
        let input = PaymentInput {
            w_id: 1,
            d_id: 3,
            c_w_id: 2,
            c_d_id: 1,
            customer: CustomerRef::LastName("TESTNAME".into()),
            amount_cents: 12_345,
        };
        // TESTNAME customers live in warehouse 1: this one is remote, in 2,
        // and has none.
        assert!(payment(db, &t, &input, 9_999).is_err());
        let input = PaymentInput { c_w_id: 1, ..input };
        assert_eq!(payment(db, &t, &input, 9_999).unwrap(), 103);
        let c = get(db, CUSTOMER, &[i(1), i(1), i(103)]).unwrap();
        let template = get(db, CUSTOMER, &[i(1), i(1), i(1)]).unwrap();
        assert_eq!(dec(&c, C_BALANCE), dec(&template, C_BALANCE) - 12_345);
        assert_eq!(
            dec(&c, C_YTD_PAYMENT),
            dec(&template, C_YTD_PAYMENT) + 12_345
        );
        assert_eq!(int(&c, C_PAYMENT_CNT), int(&template, C_PAYMENT_CNT) + 1);
        assert_eq!(
            dec(&get(db, WAREHOUSE, &[i(1)]).unwrap(), W_YTD),
            30_012_345
        );
        assert_eq!(
            dec(&get(db, DISTRICT, &[i(1), i(3)]).unwrap(), D_YTD),
            3_012_345
        );
        let h = get(db, HISTORY, &[i(9_999)]).unwrap();
        assert_eq!((dec(&h, H_AMOUNT), int(&h, 1)), (12_345, 103));
        assert_eq!(tpcc.check(db, 0).unwrap(), Ok(()));
    });
}

#[test]
fn payment_notes_bad_credit_in_c_data() {
    let mut row: Vec<Value> = schema::customer().columns().iter().map(|_| i(0)).collect();
    row[C_BALANCE] = Value::Decimal(-1_000);
    row[C_YTD_PAYMENT] = Value::Decimal(1_000);
    row[C_CREDIT] = Value::Str("BC".into());
    row[C_DATA] = Value::Str("x".repeat(500));
    pay(&mut row, 250, "7 1 1 1 1 2.50 | ");
    assert_eq!(dec(&row, C_BALANCE), -1_250);
    assert_eq!(dec(&row, C_YTD_PAYMENT), 1_250);
    assert_eq!(int(&row, C_PAYMENT_CNT), 1);
    assert!(text(&row, C_DATA).starts_with("7 1 1 1 1 2.50 | xx"));
    assert_eq!(text(&row, C_DATA).len(), 500);
    row[C_CREDIT] = Value::Str("GC".into());
    pay(&mut row, 1, "note");
    assert!(
        text(&row, C_DATA).starts_with("7 1"),
        "good credit: data unchanged"
    );
}

#[test]
fn order_status_finds_the_last_order_of_the_middle_namesake() {
    with_db(small(), |db, _| {
        add_namesakes(db);
        let t = Tables::open(db).unwrap();
        let lines = (1..=7)
            .map(|n| OrderLineInput {
                i_id: n,
                supply_w_id: 1,
                quantity: 1,
            })
            .collect();
        let input = NewOrderInput {
            w_id: 1,
            d_id: 1,
            c_id: 103,
            lines,
        };
        new_order(db, &t, &input).unwrap();
        let input = NewOrderInput {
            lines: vec![
                OrderLineInput {
                    i_id: 9,
                    supply_w_id: 1,
                    quantity: 2
                };
                5
            ],
            ..input
        };
        new_order(db, &t, &input).unwrap();
        let status = order_status(
            db,
            &t,
            &OrderStatusInput {
                w_id: 1,
                d_id: 1,
                customer: CustomerRef::LastName("TESTNAME".into()),
            },
        )
        .unwrap();
        assert_eq!((status.c_id, status.o_id), (103, Some(32)));
        assert_eq!((status.lines.len(), status.carrier_id), (5, 0));
        let none = order_status(
            db,
            &t,
            &OrderStatusInput {
                w_id: 1,
                d_id: 1,
                customer: CustomerRef::Id(101),
            },
        )
        .unwrap();
        assert_eq!(none.o_id, None, "customer 101 never ordered");
    });
}

#[test]
fn delivery_delivers_the_oldest_order_of_every_district() {
    with_db(small(), |db, tpcc| {
        let t = Tables::open(db).unwrap();
        let o = get(db, ORDER, &[i(2), i(4), i(22)]).unwrap();
        let c_id = int(&o, O_C_ID);
        let c_before = get(db, CUSTOMER, &[i(2), i(4), i(c_id)]).unwrap();
        let lines: Vec<_> = (1..=int(&o, O_OL_CNT))
            .map(|n| get(db, ORDER_LINE, &[i(2), i(4), i(22), i(n)]).unwrap())
            .collect();
        let sum: i64 = lines.iter().map(|l| dec(l, OL_AMOUNT)).sum();
        assert_eq!(delivery(db, &t, 2, 7).unwrap(), vec![22; 10]);
        assert!(get(db, NEW_ORDER, &[i(2), i(4), i(22)]).is_none());
        assert!(get(db, NEW_ORDER, &[i(2), i(4), i(23)]).is_some());
        assert_eq!(
            int(&get(db, ORDER, &[i(2), i(4), i(22)]).unwrap(), O_CARRIER_ID),
            7
        );
        let line = get(db, ORDER_LINE, &[i(2), i(4), i(22), i(1)]).unwrap();
        assert!(int(&line, OL_DELIVERY_D) > 0);
        let c = get(db, CUSTOMER, &[i(2), i(4), i(c_id)]).unwrap();
        assert_eq!(dec(&c, C_BALANCE), dec(&c_before, C_BALANCE) + sum);
        assert_eq!(int(&c, C_DELIVERY_CNT), int(&c_before, C_DELIVERY_CNT) + 1);
        // Warehouse 1 untouched; the next delivery takes 23.
        assert!(get(db, NEW_ORDER, &[i(1), i(4), i(22)]).is_some());
        assert_eq!(delivery(db, &t, 2, 1).unwrap(), vec![23; 10]);
        assert_eq!(tpcc.check(db, 0).unwrap(), Ok(()));
        // Nine new orders per district: the rest, then districts are skipped.
        for _ in 0..7 {
            delivery(db, &t, 2, 1).unwrap();
        }
        assert_eq!(delivery(db, &t, 2, 1).unwrap(), vec![0; 10]);
        assert_eq!(tpcc.check(db, 0).unwrap(), Ok(()));
    });
}

#[test]
fn stock_level_counts_distinct_low_items_of_the_last_20_orders() {
    with_db(small(), |db, _| {
        let t = Tables::open(db).unwrap();
        // By hand: the items of orders 11 to 30 of (1, 5), and their stock.
        let mut items = std::collections::BTreeSet::new();
        for o in 11..=30 {
            let ol_cnt = int(&get(db, ORDER, &[i(1), i(5), i(o)]).unwrap(), O_OL_CNT);
            for n in 1..=ol_cnt {
                items.insert(int(
                    &get(db, ORDER_LINE, &[i(1), i(5), i(o), i(n)]).unwrap(),
                    OL_I_ID,
                ));
            }
        }
        let quantity = |item: i64| int(&get(db, STOCK, &[i(1), i(item)]).unwrap(), S_QUANTITY);
        for threshold in [10, 15, 20, 60, 101] {
            let expect = items.iter().filter(|&&it| quantity(it) < threshold).count() as u64;
            assert_eq!(
                stock_level(db, &t, 1, 5, threshold).unwrap(),
                expect,
                "threshold {threshold}"
            );
        }
        // All loaded quantities are 10 to 100: every distinct item is under 101.
        assert_eq!(stock_level(db, &t, 1, 5, 101).unwrap(), items.len() as u64);
        assert_eq!(stock_level(db, &t, 1, 5, 10).unwrap(), 0);
    });
}

/// Each consistency condition catches its own kind of damage.
#[test]
fn consistency_conditions_catch_a_broken_database() {
    type Break = fn(&Database);
    let breaks: [(&str, Break); 5] = [
        ("condition 1", |db| {
            change(db, WAREHOUSE, &[i(2)], |r| {
                r[W_YTD] = Value::Decimal(dec(r, W_YTD) + 1)
            })
        }),
        ("condition 2", |db| {
            change(db, DISTRICT, &[i(1), i(6)], |r| {
                r[D_NEXT_O_ID] = i(int(r, D_NEXT_O_ID) + 1)
            })
        }),
        ("condition 2", |db| {
            delete(db, NEW_ORDER, &[i(2), i(3), i(30)])
        }),
        ("condition 3", |db| {
            delete(db, NEW_ORDER, &[i(1), i(9), i(25)])
        }),
        ("condition 4", |db| {
            delete(db, ORDER_LINE, &[i(2), i(10), i(3), i(2)])
        }),
    ];
    for (expect, damage) in breaks {
        let found = with_db(small(), move |db, tpcc| {
            assert_eq!(tpcc.check(db, 0).unwrap(), Ok(()));
            damage(db);
            tpcc.check(db, 0).unwrap()
        });
        let violation = found.expect_err("the damage is caught");
        assert!(violation.starts_with(expect), "{expect}: {violation}");
    }
}

#[test]
fn mix_parses_and_refuses_bad_percentages() {
    assert_eq!(Mix::parse("45,43,4,4,4").unwrap(), Mix::default());
    assert_eq!(Mix::parse(" 100, 0,0,0,0").unwrap(), Mix([100, 0, 0, 0, 0]));
    for bad in ["45,43,4,4", "45,43,4,4,5", "a,b,c,d,e", "", "45,43,4,4,-4"] {
        let e = Mix::parse(bad).unwrap_err();
        assert!(e.starts_with("--mix") && !e.contains('\n'), "{e}");
    }
}

#[test]
fn options_refuse_absurd_sizes() {
    for (o, name) in [
        (
            TpccOptions {
                warehouses: 0,
                ..small()
            },
            "--warehouses",
        ),
        (
            TpccOptions {
                warehouses: WAREHOUSES_MAX + 1,
                ..small()
            },
            "--warehouses",
        ),
        (
            TpccOptions {
                items: 0,
                ..small()
            },
            "--items",
        ),
        (
            TpccOptions {
                customers_per_district: 3_001,
                ..small()
            },
            "--customers-per-district",
        ),
    ] {
        assert!(o.validate().unwrap_err().starts_with(name));
    }
    assert!(small().validate().is_ok());
}

/// A short driven run: every type runs, the mix is near 45/43/4/4/4, about
/// 1% of New-Orders roll back, and the database stays consistent.
#[test]
fn driven_run_runs_every_type_and_stays_consistent() {
    let options = TpccOptions {
        warehouses: 1,
        ..small()
    };
    let (reports, check, departures) = with_db(options, |db, tpcc| {
        let workload: Arc<dyn Workload> = Arc::new(TpcC::new(tpcc.options().clone()));
        drive(db, &workload, 10, 20 * NS_PER_S, NS_PER_S);
        (
            workload.transaction_types(),
            workload.check(db, 0).unwrap(),
            workload.departures(),
        )
    });
    assert_eq!(check, Ok(()));
    let total: u64 = reports.iter().map(|r| r.count).sum();
    assert!(total > 500, "{total} transactions");
    for r in &reports {
        assert!(r.count > 0, "{} never ran", r.name);
        assert!(r.latency_ms.p50 <= r.latency_ms.p99 && r.latency_ms.p99 <= r.latency_ms.max);
    }
    let share = |k: usize| reports[k].count as f64 / total as f64;
    assert!((share(0) - 0.45).abs() < 0.05 && (share(1) - 0.43).abs() < 0.05);
    assert!(reports[0].rollbacks < reports[0].count / 20);
    assert!(departures.iter().any(|d| d.contains("30 customers")));
}

/// A data space named after a table takes that table: a page size per
/// table space (here 4 KB stock pages beside 8 KB pages for the rest).
#[test]
fn a_data_space_named_after_a_table_takes_it() {
    let spaces = Sim::run(SimConfig::default(), |_| {
        let mut config = DbConfig::simple("memory", "memory", 8192, 16 << 20);
        let mut stock = config.data[0].clone();
        stock.name = STOCK.into();
        stock.page_bytes = 4096;
        config.data.push(stock);
        let devices = Devices::from_presets(&config).expect("devices");
        let db = Database::open_with(&config, devices).expect("open");
        let tpcc = TpcC::new(TpccOptions {
            warehouses: 1,
            ..small()
        });
        tpcc.setup(&db).expect("load");
        assert_eq!(tpcc.check(&db, 0).unwrap(), Ok(()));
        (
            db.table(STOCK).unwrap().def().space,
            db.table(ITEM).unwrap().def().space,
        )
    })
    .expect("simulation")
    .0
    .finished()
    .expect("finished");
    assert_ne!(spaces.0, spaces.1);
}

#[test]
fn full_scale_follows_the_specification() {
    let o = TpccOptions::default();
    assert_eq!(o.new_orders_per_district(), 900);
    assert_eq!(o.first_new_order_id(), 2_101);
    assert_eq!(o.last_name_number_max(), 999);
    assert!(departures(&o).iter().all(|d| !d.contains("instead of")));
    let constants = random::Constants::load(o.seed);
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
    // The first 1,000 customers take names 0 to 999 in order; the rest NURand.
    assert_eq!(
        load::load_last_name(&mut rng, 1, &o, &constants),
        "BARBARBAR"
    );
    assert_eq!(
        load::load_last_name(&mut rng, 1_000, &o, &constants),
        "EINGEINGEING"
    );
    let mut names = std::collections::BTreeSet::new();
    for c in 1_001..=3_000 {
        names.insert(load::load_last_name(&mut rng, c, &o, &constants));
    }
    assert!(
        names.len() > 500 && names.len() < 1_000,
        "{} names",
        names.len()
    );
}

/// With keying and think times, 10 terminals per warehouse key in about
/// 12.86 New-Orders a minute: efficiency near 100%.
#[test]
fn think_times_bring_efficiency_near_100_percent() {
    let options = TpccOptions {
        think: true,
        ..small()
    };
    let summary = with_db(options, |db, tpcc| {
        let workload: Arc<dyn Workload> = Arc::new(TpcC::new(tpcc.options().clone()));
        let run = drive(db, &workload, 20, 1_200 * NS_PER_S, 60 * NS_PER_S);
        assert_eq!(workload.check(db, 0).unwrap(), Ok(()));
        TpccSummary::new(2, run.measured_s, workload.transaction_types())
    });
    assert!(
        (80.0..110.0).contains(&summary.efficiency_percent),
        "efficiency {:.1}% (tpmC {:.2})",
        summary.efficiency_percent,
        summary.tpmc
    );
    assert!(
        !departures(&TpccOptions {
            think: true,
            ..small()
        })
        .iter()
        .any(|d| d.contains("think"))
    );
}

/// The scaled-down study's knobs: 1/k of the warehouses with think times
/// divided by k offer k times the load per warehouse; terminals stay on the
/// active warehouses; a pool of connections caps transactions in flight.
#[test]
fn think_divisor_active_warehouses_and_connections_do_what_they_say() {
    let options = TpccOptions {
        warehouses: 3,
        active_warehouses: 2,
        think: true,
        think_divisor: 10.0,
        connections: 2,
        ..small()
    };
    let (summary, in_flight_max, homes) = with_db(options.clone(), |db, tpcc| {
        let tpcc = Arc::new(TpcC::new(tpcc.options().clone()));
        let homes: Vec<u32> = (0..20).map(|t| tpcc.home(t).0).collect();
        let workload: Arc<dyn Workload> = tpcc.clone();
        let run = drive(db, &workload, 20, 120 * NS_PER_S, 6 * NS_PER_S);
        assert_eq!(workload.check(db, 0).unwrap(), Ok(()));
        let summary = TpccSummary::new(2, run.measured_s, workload.transaction_types());
        (summary, tpcc.connections_in_use_max(), homes)
    });
    assert!(homes.iter().all(|&w| (1..=2).contains(&w)), "{homes:?}");
    // 20 terminals on 2 warehouses, ten times faster: ten times 12.86
    // tpmC per warehouse at full efficiency.
    assert!(
        (800.0..1100.0).contains(&summary.efficiency_percent),
        "efficiency {:.1}%",
        summary.efficiency_percent
    );
    assert_eq!(
        in_flight_max, 2,
        "the pool of 2 connections was not the limit"
    );
    let words = departures(&options).join("\n");
    assert!(
        words.contains("divided by 10")
            && words.contains("first 2 of the 3")
            && words.contains("2 database connections"),
        "{words}"
    );
}

#[test]
fn scaled_study_knobs_refuse_absurd_values() {
    for (options, words) in [
        (
            TpccOptions {
                active_warehouses: 3,
                ..small()
            },
            "--active-warehouses 3",
        ),
        (
            TpccOptions {
                think_divisor: 0.5,
                ..small()
            },
            "--think-divisor 0.5",
        ),
        (
            TpccOptions {
                think_divisor: f64::NAN,
                ..small()
            },
            "--think-divisor NaN",
        ),
        (
            TpccOptions {
                connections: CONNECTIONS_MAX + 1,
                ..small()
            },
            "--connections",
        ),
    ] {
        let e = options.validate().unwrap_err();
        assert!(e.starts_with(words), "{e}");
    }
}

/// A database that has run transactions is not taken for a fresh load.
#[test]
fn resume_takes_only_a_database_as_loaded() {
    let (fresh, after_payment) = with_db(small(), |db, tpcc| {
        let fresh = tpcc.resume(db).map_err(|e| e.to_string());
        let t = Tables::open(db).unwrap();
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(5);
        let input = payment_input(&mut rng, 1, tpcc.options(), &tpcc.constants().1);
        let h_id = super::load::load_history_id(tpcc.options(), 2, 10, 30) + 1;
        payment(db, &t, &input, h_id).unwrap();
        (fresh, tpcc.resume(db).map_err(|e| e.to_string()))
    });
    assert_eq!(fresh, Ok(0));
    assert!(after_payment.unwrap_err().contains("exactly as loaded"));
}

/// A load on a log far smaller than the database: a batch refused because
/// the log is full must wait for the checkpointer, not retry at the same
/// virtual instant (before the fix, with free CPU during the load and
/// memory devices, no time passed, the checkpointer never ran, and the
/// load failed with "log full" after its retries).
#[test]
fn regression_a_load_refused_for_a_full_log_waits_for_the_checkpoint() {
    let (result, wraps) = Sim::run(SimConfig::default(), |_| {
        let mut config = DbConfig::simple("memory", "memory", 8192, 4 << 20);
        config.log.capacity_bytes = Some(8 << 20);
        let devices = Devices::from_presets(&config).expect("devices");
        let db = Database::open_with(&config, devices).expect("open");
        // About 7 MB of rows, logged with page images: the 8 MB log wraps.
        let tpcc = TpcC::new(TpccOptions {
            warehouses: 1,
            items: 10_000,
            customers_per_district: 300,
            load_logging: flashlab_engine::BulkLogging::PageImages,
            ..small()
        });
        let loaded = tpcc.setup(&db).map_err(|e| e.to_string());
        let check = tpcc.check(&db, 0).map_err(|e| e.to_string());
        ((loaded, check), db.stats().log.wraps)
    })
    .expect("simulation")
    .0
    .finished()
    .expect("finished");
    assert_eq!(result.0, Ok(()), "the load failed");
    assert_eq!(result.1, Ok(Ok(())));
    assert!(
        wraps > 0,
        "the log never wrapped: the test does not exercise a full log"
    );
}
